#!/usr/bin/env python3
"""The bad-input catalogue (tools/tests/bad-inputs/catalogue.yaml), run against the real binary.

Every case is a stepsim command line with the exit code it must give within the time limit and
fragments its stderr must contain. A rejection (exit 2) must also offer a fix, and no case may
crash (signal), hang (time limit), report an internal error or leave a process behind.
Prints TAP, one line per case, so meson and tools/test count the cases one by one.

usage: bad_inputs.py STEPSIM_BINARY CATALOGUE_DIR [NAME_FRAGMENT]
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

import yaml

TIME_LIMIT_S = 5.0


def build_text(pieces):
    """A generated input: each piece is a string, or [string, count] for a repeated one."""
    out = []
    for piece in pieces:
        if isinstance(piece, list):
            out.append(str(piece[0]) * int(piece[1]))
        else:
            out.append(str(piece))
    return "".join(out)


def expand(arg, files, tmp):
    return str(arg).replace("{files}", files).replace("{tmp}", tmp)


def write_inputs(case, files, tmp):
    for name, pieces in (case.get("make") or {}).items():
        data = build_text(pieces) if isinstance(pieces, list) else str(pieces)
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(data.encode("utf-8", "surrogateescape"))
    for name, hex_bytes in (case.get("make_bytes") or {}).items():
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(bytes.fromhex(hex_bytes))


def run_case(binary, case, files):
    """Returns a list of problems (empty when the case passes) and the elapsed seconds."""
    with tempfile.TemporaryDirectory(prefix="stepsim-bad-input-") as tmp:
        write_inputs(case, files, tmp)
        args = [binary] + [expand(a, files, tmp) for a in case["args"]]
        start = time.monotonic()
        # Its own session, so a hang is killed with every child it started.
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=tmp, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=TIME_LIMIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return [f"hang: no exit within {TIME_LIMIT_S:.0f} s"], time.monotonic() - start
        elapsed = time.monotonic() - start
        err = err.decode("utf-8", "replace")
        problems = []
        if proc.returncode < 0:
            problems.append(f"crash: killed by signal {-proc.returncode}")
        elif proc.returncode != case["exit"]:
            problems.append(f"exit {proc.returncode}, expected {case['exit']}")
        if "internal error" in err:
            problems.append("internal error")
        for fragment in case.get("says", []):
            if str(fragment) not in err:
                problems.append(f"stderr lacks {fragment!r}")
        if case["exit"] == 2 and "fix" not in err:
            problems.append("the rejection offers no fix")
        try:
            os.killpg(proc.pid, 0)
            problems.append("a process of the case outlived it")
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if problems:
            problems.append("stderr: " + err.strip()[:600].replace("\n", "\n#   "))
        return problems, elapsed


def main():
    binary, folder = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    only = sys.argv[3] if len(sys.argv) > 3 else ""
    with open(os.path.join(folder, "catalogue.yaml")) as f:
        cases = [c for c in yaml.safe_load(f)["cases"] if only in c["name"]]
    names = [c["name"] for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        print(f"Bail out! duplicate case names: {sorted(duplicates)}")
        return 1
    files = os.path.join(folder, "files")
    print(f"1..{len(cases)}")
    failed = 0
    for number, case in enumerate(cases, 1):
        problems, elapsed = run_case(binary, case, files)
        status = "not ok" if problems else "ok"
        print(f"{status} {number} {case['name']} ({elapsed:.2f} s)")
        for p in problems:
            print("#   " + p)
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
