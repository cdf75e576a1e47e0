#!/usr/bin/env python3
"""numerics.py: how close an engine's log-probabilities are to exact arithmetic.

A float64 reference transformer, written here with numpy from a GGUF file's tensors as PyPI's
gguf package dequantizes them (not the engine's code): no rounding of activations, of the KV
cache or of sums. It reads log-probability files in llama-perplexity's --kl-divergence-base
format (written by `llm perplexity` or llama.cpp's `llama-perplexity`, on the same text, -c and
--chunks), evaluates the same tokens, and prints per file, as JSON lines:

  kl        mean KL(reference || engine) over the scored positions, in nats
  kl_max    its largest value at one position
  top1      the share of positions where the engine's most likely token is the reference's
  dtop1     mean |log p_engine(t) - log p_reference(t)|, t the reference's most likely token
  dppl      PPL_engine / PPL_reference - 1 (the file's tokens' log-probabilities)

Architectures: llama (and its variants of RoPE frequencies), qwen2 (biases, NeoX RoPE) and
gemma3 (embedding scale, norms around each block, QK norms, GELU, local and global RoPE bases).
The files store log-probabilities as 16-bit steps of (max - min) / 65535 with min >= max - 16:
an engine equal to the reference reads as |KL| ~1e-6 (those steps), far below any quantized type's.

  numerics.py MODEL.gguf FILE.kld [FILE2.kld ...] [--write-base REF.kld]

--write-base also writes the reference's own log-probabilities in that format, so that
`llm perplexity --kl-divergence --kl-divergence-base REF.kld -m MODEL` (or llama-perplexity) compares
against exact arithmetic itself.
"""
import json
import math
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType
from gguf.quants import dequantize


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


class Model:
    def __init__(self, path):
        r = GGUFReader(path)
        self.arch = field(r, "general.architecture")
        if self.arch not in ("llama", "qwen2", "gemma3"):
            raise SystemExit(f"numerics.py: architecture {self.arch} is not in the reference")
        a = self.arch
        self.E = field(r, f"{a}.embedding_length")
        self.L = field(r, f"{a}.block_count")
        self.H = field(r, f"{a}.attention.head_count")
        hkv = field(r, f"{a}.attention.head_count_kv", self.H)
        self.HKV = hkv if isinstance(hkv, int) else hkv[0]
        self.hd = field(r, f"{a}.attention.key_length", self.E // self.H)
        self.eps = field(r, f"{a}.attention.layer_norm_rms_epsilon", 1e-5)
        self.base = field(r, f"{a}.rope.freq_base", 10000.0)
        self.n_rot = field(r, f"{a}.rope.dimension_count", self.hd)
        self.window = field(r, f"{a}.attention.sliding_window", 0)
        self.base_swa = field(r, f"{a}.rope.freq_base_swa", 10000.0)
        pattern = field(r, f"{a}.attention.sliding_window_pattern", 6)
        if isinstance(pattern, list):
            self.local = [bool(v) for v in pattern]
        else:
            self.local = [pattern == 0 or l % pattern < pattern - 1 for l in range(self.L)]   # (0: all, as llama.cpp)
        self.freq_scale = 1.0
        if field(r, f"{a}.rope.scaling.type", "none") == "linear":
            self.freq_scale = 1.0 / field(r, f"{a}.rope.scaling.factor", 1.0)
        self.bos = field(r, "tokenizer.ggml.bos_token_id", -1)
        self.t = {}
        for t in r.tensors:
            x = dequantize(t.data, t.tensor_type).astype(np.float64)
            shape = tuple(int(d) for d in reversed(t.shape.tolist()))   # rows, columns
            self.t[t.name] = x.reshape(shape)
        self.n_vocab = self.t["token_embd.weight"].shape[0]

    def w(self, name):
        return self.t.get(name)

    def rope(self, x, pos, base, scale, neox):
        # x: (n, heads, hd); pos: (n,)
        half = self.n_rot // 2
        inv = scale * base ** (-2.0 * np.arange(half) / self.n_rot)
        ff = self.w("rope_freqs.weight")
        if ff is not None:
            inv = inv / ff.reshape(-1)[:half]
        th = pos[:, None] * inv[None, :]
        c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        y = x.copy()
        if neox:
            a, b = x[..., :half], x[..., half:self.n_rot]
            y[..., :half], y[..., half:self.n_rot] = a * c - b * s, a * s + b * c
        else:
            a, b = x[..., 0:self.n_rot:2], x[..., 1:self.n_rot:2]
            y[..., 0:self.n_rot:2], y[..., 1:self.n_rot:2] = a * c - b * s, a * s + b * c
        return y

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def logits(self, tokens):
        """logits[n][n_vocab] of every position of one sequence, in float64"""
        n = len(tokens)
        g3 = self.arch == "gemma3"
        x = self.t["token_embd.weight"][tokens]
        if g3:
            x = x * math.sqrt(self.E)
        pos = np.arange(n, dtype=np.float64)
        G = self.H // self.HKV
        mask = np.tril(np.ones((n, n), dtype=bool))
        for l in range(self.L):
            p = f"blk.{l}."
            def lin(name, v, bias=True):
                y = v @ self.w(p + name + ".weight").T
                b = self.w(p + name + ".bias")
                return y + b if (bias and b is not None) else y
            h = self.norm(x, self.w(p + "attn_norm.weight"))
            q = lin("attn_q", h).reshape(n, self.H, self.hd)
            k = lin("attn_k", h).reshape(n, self.HKV, self.hd)
            v = lin("attn_v", h).reshape(n, self.HKV, self.hd)
            base, fs, lmask, scale = self.base, self.freq_scale, mask, 1.0 / math.sqrt(self.hd)
            if g3:
                q = self.norm(q, self.w(p + "attn_q_norm.weight"))
                k = self.norm(k, self.w(p + "attn_k_norm.weight"))
                if self.window and self.local[l]:   # local layers: a window and their own RoPE base
                    base, fs = self.base_swa, 1.0
                    lmask = mask & (pos[:, None] - pos[None, :] < self.window)
            q = self.rope(q, pos, base, fs, self.arch != "llama")
            k = self.rope(k, pos, base, fs, self.arch != "llama")
            k = np.repeat(k, G, axis=1)
            v = np.repeat(v, G, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) * scale
            s = np.where(lmask[None], s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            o = np.einsum("hqk,khd->qhd", s, v).reshape(n, self.H * self.hd)
            o = lin("attn_output", o, bias=False)
            if g3:
                o = self.norm(o, self.w(p + "post_attention_norm.weight"))
            x = x + o
            h = self.norm(x, self.w(p + "ffn_norm.weight"))
            gt, up = lin("ffn_gate", h, False), lin("ffn_up", h, False)
            if g3:
                act = 0.5 * gt * (1 + np.tanh(math.sqrt(2 / math.pi) * (gt + 0.044715 * gt ** 3)))
            else:
                act = gt / (1 + np.exp(-gt))
            f = lin("ffn_down", act * up, False)
            if g3:
                f = self.norm(f, self.w(p + "post_ffw_norm.weight"))
            x = x + f
        x = self.norm(x, self.w("output_norm.weight"))
        out = self.w("output.weight")
        return x @ (out if out is not None else self.t["token_embd.weight"]).T


def read_kld(path):
    """(n_ctx, n_vocab, tokens[n_chunk][n_ctx], logp[n_chunk][n_scored][n_vocab])"""
    with open(path, "rb") as f:
        if f.read(8) != b"_logits_":
            raise SystemExit(f"numerics.py: {path} is not a log-probability file")
        n_ctx, n_vocab, n_chunk = np.frombuffer(f.read(12), dtype=np.int32)
        tokens = np.frombuffer(f.read(4 * n_ctx * n_chunk), dtype=np.int32).reshape(n_chunk, n_ctx)
        nv = 2 * ((n_vocab + 1) // 2) + 4
        ns = n_ctx - 1 - n_ctx // 2
        rec = np.frombuffer(f.read(), dtype=np.uint16).reshape(n_chunk, ns, nv)
    scale = rec[..., 0:2].copy().view(np.float32)[..., 0].astype(np.float64)
    lmin = rec[..., 2:4].copy().view(np.float32)[..., 0].astype(np.float64)
    q = rec[..., 4:4 + n_vocab]
    logp = scale[..., None] * q.astype(np.float64) + lmin[..., None]
    logp[q == 0] = np.nan   # at or below the floor: only known to be at most lmin
    return int(n_ctx), int(n_vocab), tokens, logp


def write_kld(path, n_ctx, n_vocab, tokens, logp):
    nv = 2 * ((n_vocab + 1) // 2) + 4
    with open(path, "wb") as f:
        f.write(b"_logits_")
        f.write(np.array([n_ctx, n_vocab, tokens.shape[0]], dtype=np.int32).tobytes())
        f.write(tokens.astype(np.int32).tobytes())
        for c in range(logp.shape[0]):
            for row in logp[c]:
                mx = row.max()
                lo = max(row.min(), mx - 16)
                scale = np.float32((mx - lo) / 65535)
                rec = np.zeros(nv, dtype=np.uint16)
                rec[0:2] = np.array([scale], dtype=np.float32).view(np.uint16)
                rec[2:4] = np.array([lo], dtype=np.float32).view(np.uint16)
                if scale > 0:
                    q = np.rint((row - lo) / np.float64(scale))
                    rec[4:4 + n_vocab] = np.where(row > lo, np.clip(q, 0, 65535), 0).astype(np.uint16)
                f.write(rec.tobytes())


def reference(model, n_ctx, tokens):
    """log-probabilities of the scored positions of every chunk, as the engines score them"""
    first = n_ctx // 2
    add_bos = model.bos >= 0 and tokens[0][0] == model.bos   # the text was tokenized with BOS
    out = []
    for chunk in tokens:
        t = chunk.copy()
        if add_bos:   # every chunk starts with BOS then
            t[0] = model.bos
        lg = model.logits(t)[first:n_ctx - 1]
        lg = lg - lg.max(axis=-1, keepdims=True)
        out.append(lg - np.log(np.exp(lg).sum(axis=-1, keepdims=True)))
    return np.stack(out)


def compare(ref, logp, tokens, n_ctx):
    first = n_ctx // 2
    # A token under the file's floor (16 nats below the top) counts as the reference's value: p is
    # then at most e^-16 of the top's, and the clamped value would bias every sum upwards.
    logp = np.where(np.isnan(logp), ref, logp)
    p = np.exp(ref)
    kl = (p * (ref - logp)).sum(axis=-1)
    top_ref = ref.argmax(axis=-1)
    top_eng = logp.argmax(axis=-1)
    lp_ref = np.take_along_axis(ref, top_ref[..., None], -1)[..., 0]
    lp_eng = np.take_along_axis(logp, top_ref[..., None], -1)[..., 0]
    nxt = tokens[:, first + 1:n_ctx]
    nll_ref = -np.take_along_axis(ref, nxt[..., None], -1).mean()
    nll_eng = -np.take_along_axis(logp, nxt[..., None], -1).mean()
    return {"kl": float(kl.mean()), "kl_max": float(kl.max()), "top1": float((top_ref == top_eng).mean()),
            "dtop1": float(np.abs(lp_eng - lp_ref).mean()), "dppl": float(math.exp(nll_eng - nll_ref) - 1),
            "positions": int(kl.size)}


def main(argv):
    args, base = [], None
    i = 0
    while i < len(argv):
        if argv[i] == "--write-base" and i + 1 < len(argv):
            base = argv[i + 1]
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) < 2:
        raise SystemExit(__doc__)
    model = Model(args[0])
    ref = None
    for path in args[1:]:
        n_ctx, n_vocab, tokens, logp = read_kld(path)
        if n_vocab != model.n_vocab:
            raise SystemExit(f"numerics.py: {path} has {n_vocab} tokens of vocabulary, the model {model.n_vocab}")
        if ref is None:
            ref_tokens, ref_ctx = tokens, n_ctx
            ref = reference(model, n_ctx, tokens)
            if base:
                write_kld(base, n_ctx, n_vocab, tokens, ref)
        elif n_ctx != ref_ctx or not np.array_equal(tokens, ref_tokens):
            raise SystemExit(f"numerics.py: {path} holds other tokens than {args[1]}")
        print(json.dumps({"file": path, **compare(ref, logp, tokens, n_ctx)}))


if __name__ == "__main__":
    main(sys.argv[1:])
