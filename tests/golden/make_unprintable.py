"""The code points above U+00FF that CPython's repr() escapes.

    make_unprintable.py
        Prints, one per line, the inclusive ranges "START END" (hex) of the
        characters from U+0100 up for which str.isprintable() is false
        (categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs but the space): repr()
        writes them as \\uXXXX or \\UXXXXXXXX. crates/abi-pyjson/src/unprintable.rs
        holds the same ranges; its test runs this script and compares.
"""

import sys
import unicodedata

print(f"# CPython {sys.version.split()[0]}, Unicode {unicodedata.unidata_version}")
start = None
for code in range(0x100, 0x110000):
    unprintable = not chr(code).isprintable()
    if unprintable and start is None:
        start = code
    elif not unprintable and start is not None:
        print(f"{start:X} {code - 1:X}")
        start = None
if start is not None:
    print(f"{start:X} 10FFFF")
