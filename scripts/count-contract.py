#!/usr/bin/env python3
"""Counts the traits of the backend contract and their required methods (declared without a
body) and default methods: python3 scripts/count-contract.py [FILES], by default the files of
crates/hdg-core/src/backend/ and crates/hdg-core/src/solver.rs."""
import glob, pathlib, re, sys

files = sys.argv[1:] or sorted(glob.glob("crates/hdg-core/src/backend/*.rs")) + [
    "crates/hdg-core/src/solver.rs"
]
total_traits = 0; total_req = 0; total_default = 0
for path in files:
    text = pathlib.Path(path).read_text()
    for m in re.finditer(r'^pub trait (\w+)[^{]*\{', text, re.M):
        depth = 1; i = m.end(); body_start = i
        while depth:
            c = text[i]
            if c == '{': depth += 1
            elif c == '}': depth -= 1
            i += 1
        body = text[body_start:i-1]
        # strip comments
        body = re.sub(r'//[^\n]*', '', body)
        req = dflt = 0
        # walk top-level fn declarations
        j = 0; d = 0; cur = ''
        for ch in body:
            if ch == '{':
                if d == 0 and re.search(r'\bfn\s', cur): dflt += 1; cur = ''
                d += 1
            elif ch == '}':
                d -= 1
            elif ch == ';' and d == 0:
                if re.search(r'\bfn\s', cur): req += 1
                cur = ''
            elif d == 0:
                cur += ch
        total_traits += 1; total_req += req; total_default += dflt
        print(f"{path}: {m.group(1)}: {req} required, {dflt} with defaults")
print(f"total: {total_traits} traits, {total_req} required methods, {total_default} with defaults")
