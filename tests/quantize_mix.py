#!/usr/bin/env python3
"""Compares a GGUF file that `llm quantize` wrote with llama-quantize's, through the goldens that
tests/make_quantize_goldens.sh keeps in tests/golden/quantize_mix.txt (llama.cpp's gguf-py reads
the files; numpy).

  quantize_mix.py golden SRC.gguf OUT.gguf KEY [SRC OUT KEY ...]   lines for llama-quantize's OUTs
  quantize_mix.py check GOLDEN SRC.gguf OUT.gguf KEY [SRC OUT KEY ...]   llm quantize's OUTs against them

A golden line is "KEY what ...": KEY names the model and file type (e.g. nano-k8/q4_K_M);
  KEY header SHA256            the bytes before the tensor data: metadata, names, types, offsets
  KEY file SHA256              the whole file, when every tensor is of a type whose quantizer is
                               exact (then llm quantize must write the same bytes)
  KEY tensor NAME TYPE sha256:HEX   a tensor of an exact type: its bytes (the first 16 digits)
  KEY tensor NAME TYPE sse:X   another: the sum of squared differences of its values from the
                               source's; llm quantize's may be at most 2% above it (same or better)
check prints one "ok ..." or "FAIL ..." line per golden line and exits 1 on any failure.
"""
import hashlib
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

EXACT = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "MXFP4"}
SLACK = 1.02


def tensors(path):
    r = GGUFReader(path)
    raw = open(path, "rb").read()
    out = {}
    for t in r.tensors:
        b = raw[t.data_offset:t.data_offset + t.n_bytes]
        out[t.name] = (t.tensor_type.name, b, [int(x) for x in t.shape])
    return raw, r.data_offset, out


def values(typ, b, shape):
    from gguf.constants import GGMLQuantizationType
    q = GGMLQuantizationType[typ]
    a = np.frombuffer(b, dtype=np.uint8).reshape(-1, len(b) // max(1, int(np.prod(shape[1:]))))
    return dequantize(a, q).astype(np.float64).reshape(-1)


def lines(src, out, key):
    raw, off, ts = tensors(out)
    _, _, st = tensors(src)
    res = [f"{key} header {hashlib.sha256(raw[:off]).hexdigest()}"]
    if all(t[0] in EXACT for t in ts.values()):
        res.append(f"{key} file {hashlib.sha256(raw).hexdigest()}")
    for name, (typ, b, shape) in ts.items():
        if typ in EXACT:
            res.append(f"{key} tensor {name} {typ} sha256:{hashlib.sha256(b).hexdigest()[:16]}")
        else:
            ref = values(*st[name])
            sse = float(np.sum((values(typ, b, shape) - ref) ** 2))
            res.append(f"{key} tensor {name} {typ} sse:{sse:.9g}")
    return res


def ident(f):
    return ("tensor", f[2]) if f[1] == "tensor" else (f[1],)


def check(golden, src, out, key):
    got = lines(src, out, key)
    want = [l.split() for l in open(golden) if l.startswith(key + " ")]
    have = {ident(f): f for f in (l.split() for l in got)}
    if not want:
        print(f"FAIL {key}: no golden lines")
        return 1
    fails = 0
    for w in want:
        h = have.get(ident(w))
        if w[1] != "tensor":
            ok = h is not None and h[2] == w[2]
            what = f"{w[1]} {'same' if ok else 'differs'}"
        elif h is None or h[3] != w[3]:
            ok, what = False, f"{w[2]}: type {h[3] if h else 'missing'}, llama-quantize's {w[3]}"
        elif w[4].startswith("sha256:"):
            ok = h[4] == w[4]
            what = f"{w[2]} {w[3]} bytes {'same' if ok else 'differ'}"
        else:
            mine, theirs = float(h[4][4:]), float(w[4][4:])
            ok = mine <= theirs * SLACK + 1e-12
            what = f"{w[2]} {w[3]} sse {mine:.6g}, llama-quantize's {theirs:.6g}"
        print(("ok " if ok else "FAIL ") + key + " " + what)
        fails += not ok
    wanted = {ident(w) for w in want}
    for k in have:
        if k not in wanted:
            print(f"FAIL {key} {' '.join(k)}: not in llama-quantize's file")
            fails += 1
    return fails


def main():
    if sys.argv[1] == "golden":
        args = sys.argv[2:]
        for i in range(0, len(args), 3):
            print("\n".join(lines(*args[i:i + 3])))
        return 0
    golden, args = sys.argv[2], sys.argv[3:]
    fails = sum(check(golden, *args[i:i + 3]) for i in range(0, len(args), 3))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
