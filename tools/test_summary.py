#!/usr/bin/env python3
"""Counts test cases in meson's JUnit log (gtest cases appear one by one) and prints the
closing line `N passed, N failed, N skipped`. Exits 1 when any failed or none ran."""
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
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or passed == 0 else 0)
