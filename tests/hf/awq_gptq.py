#!/usr/bin/env python3
"""AWQ and GPTQ checkpoints for the tests, and their reference dequantization, in numpy alone
(tests/fixtures.sh's virtual environment has it; no torch).

  awq_gptq.py pack IN_DIR OUT_DIR --method awq|gptq [--bits 4|8] [--group G] [--act-order]
                   [--v2] [--sym] [--seed S]
      OUT_DIR becomes an AWQ (AutoAWQ's GEMM layout) or GPTQ (AutoGPTQ / GPTQModel layout: v1
      zeros stored less one, or --v2) checkpoint of the Hugging Face directory IN_DIR (F32, F16
      or BF16): every linear layer of the decoder layers is rounded to nearest, group by group
      (asymmetric, or --sym: zero point 2^(bits-1)), and packed. --act-order gives GPTQ a random
      g_idx (inputs grouped in a shuffled order, as desc_act makes them). The rest of the
      directory is copied.
  awq_gptq.py dequant IN_DIR OUT_DIR
      OUT_DIR becomes IN_DIR's checkpoint with every quantized linear layer unpacked by the
      formats' documented packing and dequantized to F32, w = (q - z) * s, the rest as F32: the
      reference a quantized directory is compared with (also for checkpoints real tools wrote).

The packing, as AutoAWQ / AutoGPTQ / GPTQModel document and write it (W is [out, in]):
  AWQ:  qweight int32 [in, out/8], qzeros int32 [in/G, out/8]: nibble k of word c holds output
        8c + ORDER[k], ORDER = 0 2 4 6 1 3 5 7; scales fp16 [in/G, out].
  GPTQ: qweight int32 [in*bits/32, out]: word r holds inputs (32/bits)r + k in bits k*bits..;
        qzeros int32 [in/G, out*bits/32] packed along the output the same way, v1 storing z - 1;
        scales fp16 [in/G, out]; g_idx int32 [in]: input i's group. G = in for group -1; the last
        group is shorter when G does not divide in (GPTQ's ceil(in/G) groups).
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj", "gate_up_proj")


# --- safetensors, read and written here (numpy has no bfloat16) ---

def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = data[b:e]
        dt = t["dtype"]
        if dt == "BF16":
            a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, dtype={"F32": np.float32, "F16": np.float16, "I32": np.int32}[dt])
        out[name] = a.reshape(t["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dt = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int32): "I32"}[a.dtype]
        raw = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def read_dir(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(read_safetensors(os.path.join(d, f)))
    return tensors


def copy_side_files(src, dst, quant_config):
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f.endswith(".safetensors") or f == "model.safetensors.index.json" or f == "config.json":
            continue
        if os.path.isfile(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.pop("quantization_config", None)
    if quant_config:
        cfg["quantization_config"] = quant_config
    cfg["torch_dtype"] = "float16" if quant_config else "float32"
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)


# --- packing ---

def pack_along(q, bits, axis):
    """Packs unsigned quants (< 2^bits) 32/bits to an int32 along `axis`: element p*k + j of that
    axis in bits j*bits.. of word k."""
    per = 32 // bits
    q = np.moveaxis(q.astype(np.uint32), axis, -1)
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per))
    w = np.zeros(q.shape[:-1], dtype=np.uint32)
    for j in range(per):
        w |= q[..., j] << np.uint32(bits * j)
    return np.moveaxis(w, -1, axis).view(np.int32)


def unpack_along(w, bits, axis):
    per = 32 // bits
    w = np.moveaxis(w.view(np.uint32), axis, -1)
    q = np.stack([(w >> np.uint32(bits * j)) & np.uint32((1 << bits) - 1) for j in range(per)], axis=-1)
    q = q.reshape(q.shape[:-2] + (q.shape[-2] * per,))
    return np.moveaxis(q, -1, axis).astype(np.int64)


def awq_pack(q):   # q [rows, out] (4-bit) -> [rows, out/8], AutoAWQ's order
    rows, out = q.shape
    q = q.reshape(rows, out // 8, 8)[:, :, AWQ_ORDER]
    return pack_along(q.reshape(rows, out), 4, 1)


def awq_unpack(w):   # [rows, out/8] -> [rows, out]
    q = unpack_along(w, 4, 1)
    rows, out = q.shape
    inv = np.argsort(AWQ_ORDER)
    return q.reshape(rows, out // 8, 8)[:, :, inv].reshape(rows, out)


def quantize(w, bits, group, sym, g_idx):
    """Round to nearest per (group, output): w [out, in] float32 -> q [out, in], z [ng, out],
    s fp16 [ng, out]."""
    out, n_in = w.shape
    ng = int(g_idx.max()) + 1
    maxq = (1 << bits) - 1
    q = np.zeros((out, n_in), dtype=np.int64)
    z = np.zeros((ng, out), dtype=np.int64)
    s = np.zeros((ng, out), dtype=np.float16)
    for g in range(ng):
        cols = np.nonzero(g_idx == g)[0]
        x = w[:, cols].astype(np.float32)
        if sym:
            amax = np.abs(x).max(axis=1)
            scale = (2 * amax / maxq).astype(np.float16)
            zero = np.full(out, (maxq + 1) // 2)
        else:
            lo, hi = np.minimum(x.min(axis=1), 0), np.maximum(x.max(axis=1), 0)
            scale = ((hi - lo) / maxq).astype(np.float16)
            sf = scale.astype(np.float32)
            zero = np.clip(np.round(-lo / np.where(sf > 0, sf, 1)), 0, maxq).astype(np.int64)
        sf = scale.astype(np.float32)
        sf = np.where(sf > 0, sf, 1)
        q[:, cols] = np.clip(np.round(x / sf[:, None]) + zero[:, None], 0, maxq).astype(np.int64)
        z[g], s[g] = zero, scale
    return q, z, s


def pack_cmd(a):
    src = read_dir(a.src)
    rng = np.random.default_rng(a.seed)
    out_t = {}
    for name, t in src.items():
        parts = name.split(".")
        if not (name.endswith(".weight") and len(parts) >= 3 and parts[-2] in LINEARS and name.startswith("model.layers.")):
            out_t[name] = t   # (BF16 read as F32: exact)
            continue
        w = t.astype(np.float32)
        out, n_in = w.shape
        G = n_in if a.group == -1 else a.group
        groups = np.arange(n_in) // G
        g_idx = groups[np.argsort(rng.permutation(n_in))] if a.act_order else groups
        # (act-order: input perm[k] is in group k // G, perm a random permutation)
        q, z, s = quantize(w, a.bits, G, a.sym, g_idx)
        base = name[: -len(".weight")]
        if a.method == "awq":
            out_t[base + ".qweight"] = awq_pack(q.T)
            out_t[base + ".qzeros"] = awq_pack(z)
        else:
            out_t[base + ".qweight"] = pack_along(q.T, a.bits, 0)
            zs = (z - (0 if a.v2 else 1)) & ((1 << a.bits) - 1)
            out_t[base + ".qzeros"] = pack_along(zs, a.bits, 1)
            out_t[base + ".g_idx"] = g_idx.astype(np.int32)
        out_t[base + ".scales"] = s
    if a.method == "awq":
        qc = {"quant_method": "awq", "bits": a.bits, "group_size": a.group, "zero_point": True, "version": "gemm"}
    else:
        qc = {"quant_method": "gptq", "bits": a.bits, "group_size": a.group, "sym": a.sym, "desc_act": a.act_order,
              "checkpoint_format": "gptq_v2" if a.v2 else "gptq"}
    copy_side_files(a.src, a.dst, qc)
    write_safetensors(os.path.join(a.dst, "model.safetensors"), out_t)


def dequant_cmd(a):
    cfg = json.load(open(os.path.join(a.src, "config.json")))
    qc = cfg["quantization_config"]
    method, bits, group = qc["quant_method"], qc["bits"], qc["group_size"]
    v1 = method == "gptq" and qc.get("checkpoint_format", qc.get("format", "gptq")) == "gptq"
    src = read_dir(a.src)
    out_t = {}
    for name, t in src.items():
        if name.endswith((".qzeros", ".scales", ".g_idx")):
            continue
        if not name.endswith(".qweight"):
            out_t[name] = t.astype(np.float32)
            continue
        base = name[: -len(".qweight")]
        s = src[base + ".scales"].astype(np.float32)
        if method == "awq":
            q = awq_unpack(t)                          # [in, out]
            z = awq_unpack(src[base + ".qzeros"])      # [ng, out]
        else:
            q = unpack_along(t, bits, 0)               # [in, out]
            z = unpack_along(src[base + ".qzeros"], bits, 1) + (1 if v1 else 0)
        n_in = q.shape[0]
        G = n_in if group == -1 else group
        g_idx = src[base + ".g_idx"].astype(np.int64) if (base + ".g_idx") in src else np.arange(n_in) // G
        w = (q - z[g_idx]).astype(np.float32) * s[g_idx]    # [in, out]
        out_t[base + ".weight"] = np.ascontiguousarray(w.T)
    copy_side_files(a.src, a.dst, None)
    write_safetensors(os.path.join(a.dst, "model.safetensors"), out_t)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pk = sub.add_parser("pack")
    pk.add_argument("src")
    pk.add_argument("dst")
    pk.add_argument("--method", choices=["awq", "gptq"], required=True)
    pk.add_argument("--bits", type=int, default=4, choices=[4, 8])
    pk.add_argument("--group", type=int, default=128)
    pk.add_argument("--act-order", action="store_true")
    pk.add_argument("--v2", action="store_true")
    pk.add_argument("--sym", action="store_true")
    pk.add_argument("--seed", type=int, default=1)
    dq = sub.add_parser("dequant")
    dq.add_argument("src")
    dq.add_argument("dst")
    a = p.parse_args(argv)
    if a.cmd == "pack":
        if a.method == "awq" and (a.bits != 4 or a.act_order or a.v2 or a.sym):
            sys.exit("awq_gptq.py: AWQ is 4-bit, asymmetric, without act-order")
        pack_cmd(a)
    else:
        dequant_cmd(a)


if __name__ == "__main__":
    main(sys.argv[1:])
