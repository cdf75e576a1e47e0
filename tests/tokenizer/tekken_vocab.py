# A tekken vocabulary (Mistral NeMo, Mistral Small 3: the tekken.json files of PyPI's
# mistral_common) as a vocabulary-only GGUF file, written as llama.cpp's converter writes Mistral's
# own format (gguf-py's MistralVocab): tokenizer model "gpt2", pre-tokenizer "tekken", the special
# tokens first (the file's list, or mistral_common's 20 for files without one, then
# "<SPECIAL_n>" up to the file's count; control tokens), then the vocabulary truncated to the
# default size in rank order as byte-level strings, and the merges recovered from the ranks (for
# each token, every split into two tokens, ordered by their ranks). A llama architecture of one
# tiny layer makes the file loadable by llama.cpp's tools. Python's standard library only.
# Usage: python3 tests/tokenizer/tekken_vocab.py TEKKEN_JSON OUT_GGUF   (tests/fixtures.sh runs it)
import base64, json, struct, sys

SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
            "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
            "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
            "[TOOL_CONTENT]"]

def byte_encoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

def main(src, dst):
    d = json.load(open(src, encoding="utf-8"))
    cfg = d["config"]
    nspec, vsize = cfg["default_num_special_tokens"], cfg["default_vocab_size"]
    inner = vsize - nspec
    spec = [t["token_str"] for t in d["special_tokens"]] if d.get("special_tokens") else list(SPECIALS)
    spec += ["<SPECIAL_%d>" % i for i in range(len(spec), nspec)]
    vocab = sorted(d["vocab"], key=lambda v: v["rank"])[:inner]
    tb = [base64.b64decode(v["token_bytes"]) for v in vocab]
    rank = {b: i for i, b in enumerate(tb)}
    be = byte_encoder()
    enc = lambda b: "".join(be[x] for x in b)
    tokens = spec + [enc(b) for b in tb]
    types = [3] * nspec + [1] * inner
    merges = []
    for i in range(256, inner):
        m = tb[i]
        local = [(m[:j], m[j:]) for j in range(1, len(m)) if m[:j] in rank and m[j:] in rank]
        if not local:
            sys.exit("no merge for rank %d" % i)
        local.sort(key=lambda p: (rank[p[0]], rank[p[1]]))
        merges += [enc(l) + " " + enc(r) for l, r in local]
    kv = []
    def s(x): b = x.encode("utf-8"); return struct.pack("<Q", len(b)) + b
    def add(key, typ, payload): kv.append(s(key) + struct.pack("<I", typ) + payload)
    add("general.architecture", 8, s("llama"))
    add("general.name", 8, s("tekken " + cfg.get("version", "")))
    for k, v in [("context_length", 1024), ("embedding_length", 64), ("block_count", 1), ("feed_forward_length", 128),
                 ("attention.head_count", 2), ("attention.head_count_kv", 2), ("vocab_size", vsize)]:
        add("llama." + k, 4, struct.pack("<I", v))
    add("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5))
    add("tokenizer.ggml.model", 8, s("gpt2"))
    add("tokenizer.ggml.pre", 8, s("tekken"))
    add("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(tokens)) + b"".join(s(t) for t in tokens))
    add("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(types)) + struct.pack("<%di" % len(types), *types))
    add("tokenizer.ggml.merges", 9, struct.pack("<IQ", 8, len(merges)) + b"".join(s(m) for m in merges))
    for k, v in [("bos_token_id", spec.index("<s>")), ("eos_token_id", spec.index("</s>")),
                 ("unknown_token_id", spec.index("<unk>")), ("padding_token_id", spec.index("<pad>"))]:
        add("tokenizer.ggml." + k, 4, struct.pack("<I", v))
    add("tokenizer.ggml.add_bos_token", 7, b"\x01")
    add("tokenizer.ggml.add_eos_token", 7, b"\x00")
    with open(dst, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv))

main(sys.argv[1], sys.argv[2])
