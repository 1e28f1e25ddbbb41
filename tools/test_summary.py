#!/usr/bin/env python3
"""Counts test cases in meson's JUnit log (gtest cases and TAP subtests appear one by one) and,
when given, the lines of tools/fuzz (one case per fuzz target: `TARGET N executions N findings
ok`), and prints the closing line `N passed, N failed, N skipped`. Exits 1 when any failed or
none ran."""
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
passed = failed = skipped = 0
for case in root.iter("testcase"):
    if case.find("failure") is not None or case.find("error") is not None:
        failed += 1
    elif case.find("skipped") is not None:
        skipped += 1
    else:
        passed += 1
for fuzz_log in sys.argv[2:]:
    with open(fuzz_log) as f:
        for line in f:
            words = line.split()
            if len(words) >= 6 and words[2] == "executions":
                if words[-1] == "ok":
                    passed += 1
                else:
                    failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or passed == 0 else 0)
