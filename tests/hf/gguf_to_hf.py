#!/usr/bin/env python3
"""Hugging Face test fixtures made from GGUF files, with PyPI's gguf, numpy, safetensors and
tokenizers (tests/fixtures.sh installs them into its virtual environment).

  gguf_to_hf.py model IN.gguf DIR --dtype bf16|f16|f32 [--shards N] [--gguf OUT.gguf]
      DIR becomes the Hugging Face checkpoint the GGUF file was converted from (architectures
      llama, qwen2, qwen3, phi3, gemma2, gemma3; a byte-level BPE or SentencePiece vocabulary):
      config.json, model.safetensors (or N shards and model.safetensors.index.json),
      tokenizer.json, tokenizer_config.json, generation_config.json. Quantized weights are
      dequantized, then rounded to --dtype; llama's q and k rows are put back in Hugging Face's
      order (llama.cpp's converter interleaves them), Gemma's norms lose the 1 the converter
      added, Phi-3's fused projections keep their names (qkv_proj, gate_up_proj). BF16 is
      written by hand (numpy has no bfloat16), F16 and F32 by the safetensors library. --gguf
      also writes a GGUF file of the same weights in the same type, laid out as llama.cpp's
      converter lays them out (norms in F32), with the input's metadata: the engine must give the
      same logits from both.
  gguf_to_hf.py tokenizer IN.gguf PRE OUT_DIR CORPUS
      OUT_DIR/tokenizer.json: the vocabulary of IN.gguf with PRE's pre-tokenizer as the model's
      own tokenizer.json has it (gpt-2, smollm, llama-bpe, qwen2; llama-spm: Llama 2's, BPE with
      byte fallback as transformers converts a SentencePiece model, llama-spm-first and
      llama-spm-always with a Metaspace pre-tokenizer as its non-legacy conversion writes;
      gemma: Gemma's; --from DIR: DIR/tokenizer.json, which the model command made for the
      same vocabulary); OUT_DIR/corpus.jsonl: for every
      text of CORPUS (texts separated by lines "__ggml_vocab_test__", as llama.cpp's test inputs
      are) and a few more, {"text": ..., "ids": [...]} as the tokenizers library encodes it (added
      tokens matched in the text, nothing added around it).
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType as Q
from gguf.quants import dequantize


def field(r, name, default=None):
    f = r.fields.get(name)
    return default if f is None else f.contents()


# --- tokenizer.json ---

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")


def spm_merges(vocab):
    """The merges Hugging Face's converter derives from a SentencePiece BPE vocabulary: every
    split of a piece into two pieces, by the piece's id, then the left and right pieces' lengths
    (transformers' generate_merges)."""
    merges = []
    for piece, pid in vocab.items():
        local = [(piece[:i], piece[i:], pid) for i in range(1, len(piece)) if piece[:i] in vocab and piece[i:] in vocab]
        merges += sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]]))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])))
    return [(a, b) for a, b, _ in merges]


def make_spm_tokenizer(r, gemma, metaspace=None):
    """Llama 2's tokenizer.json as transformers' LlamaConverter writes it (legacy): BPE with byte
    fallback, spaces as U+2581 and one in front, by the normalizer. gemma: Gemma's (no U+2581 in
    front; a Split at spaces, which the normalizer has already replaced; BOS added)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    vocab = {}
    for i, t in enumerate(tokens):
        # the converter wrote user-defined tokens' U+2581 as spaces
        vocab.setdefault(t.replace(" ", "\u2581") if types[i] == 4 else t, i)
    unk = tokens[field(r, "tokenizer.ggml.unknown_token_id")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=spm_merges(vocab), unk_token=unk, fuse_unk=True, byte_fallback=True))
    bos = field(r, "tokenizer.ggml.bos_token_id")
    if field(r, "tokenizer.ggml.add_bos_token", gemma) and bos is not None:
        tok.post_processor = processors.TemplateProcessing(single=f"{tokens[bos]} $A", special_tokens=[(tokens[bos], bos)])
    if gemma:
        tok.normalizer = normalizers.Replace(" ", "\u2581")
        tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    elif metaspace:   # transformers' non-legacy Llama/Mistral conversion
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=metaspace, split=False)
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t in (2, 3)])
    tok.add_tokens([AddedToken(tokens[i].replace(" ", "\u2581"), special=False, normalized=True) for i, t in enumerate(types) if t == 4])
    return tok


def make_tokenizer(r, pre):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    if pre in ("llama-spm", "gemma", "llama-spm-first", "llama-spm-always"):
        return make_spm_tokenizer(r, pre == "gemma", pre[10:] if pre.startswith("llama-spm-") else None)
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = field(r, "tokenizer.ggml.merges")
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    if len(vocab) != len(tokens):
        sys.exit(f"{len(tokens) - len(vocab)} duplicate token texts: not a vocabulary tokenizer.json can hold")
    ignore = pre in ("llama-bpe",)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges], ignore_merges=ignore))
    if pre == "gpt-2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    elif pre in ("llama-bpe", "qwen2"):
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3 if pre == "llama-bpe" else QWEN2), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if pre == "qwen2":
            tok.normalizer = normalizers.NFC()
    else:
        sys.exit(f"unknown pre-tokenizer {pre}")
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # control tokens (type 3) are the special added tokens, user-defined ones (4) the others
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t == 3])
    tok.add_tokens([AddedToken(tokens[i], special=False, normalized=False) for i, t in enumerate(types) if t == 4])
    return tok


EXTRA = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>text<|endoftext|><|endoftext|> and more",
    "Numbers: 1 12 123 1234 12345 3.14159 0x1F 1e-9 2,000,000",
    "Code:\n\tdef f(x):\n\t\treturn x ** 2  # square\n\n\nprint(f(3))\n",
    "Accents: café naïve résumé Ångström; Greek: αβγ Δ; Cyrillic: Привет мир; CJK: 你好，世界; emoji: 👋🏽 🚀",
    "I'M shouting, you're whispering, they'LL see, we'd've... 'tis",
    "   leading spaces and trailing   ",
    "\n\n\nnewlines\r\n\r\nand\rreturns\u00a0nbsp\u2009thin",
    "<s>[INST] Hello </s> again<s>no space</s>",
    "Bytes of rare characters: \U0001d11e \u16a0\u16a1 \ufdfd",
    "<start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n",
    "</s>Hello<s> world</s>  two spaces<s>\nnewline",
]


def tokenizer_cmd(src, pre, out_dir, corpus, made=None):
    if made:   # the tokenizer.json a model directory has already (the same as PRE would make)
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(made, "tokenizer.json"))
    else:
        tok = make_tokenizer(GGUFReader(src), pre)
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(corpus, encoding="utf-8") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")
    texts = [t for t in texts if t] + EXTRA
    with open(os.path.join(out_dir, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t, "ids": tok.encode(t, add_special_tokens=False).ids}) + "\n")


# --- the model ---

HF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
HF_LAYER = {
    "attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight", "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias", "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
}


HF_GEMMA = {
    "post_attention_norm.weight": "post_attention_layernorm.weight", "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}
HF_PHI3 = {"attn_qkv.weight": "self_attn.qkv_proj.weight", "ffn_up.weight": "mlp.gate_up_proj.weight"}


# a short Gemma chat template (the model file has none; the engine recognises it by its turns)
GEMMA_TEMPLATE = ("{{ bos_token }}{% for message in messages %}<start_of_turn>{{ 'model' if message['role'] == 'assistant' "
                  "else message['role'] }}\n{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}"
                  "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


def hf_name(name, arch):
    if name in HF_NAMES:
        return HF_NAMES[name]
    _, layer, rest = name.split(".", 2)
    special = HF_GEMMA if arch in ("gemma2", "gemma3") else HF_PHI3 if arch == "phi3" else {}
    return f"model.layers.{layer}.{special[rest] if rest in special else HF_LAYER[rest]}"


def to_bf16(x):
    """float32 -> bfloat16 bits, rounded to nearest even."""
    b = x.astype(np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def rounded(x, dtype):
    """x rounded to dtype, as float32 (what the model file holds) and as the stored array."""
    if dtype == "bf16":
        s = to_bf16(x)
        return (s.astype(np.uint32) << 16).view(np.float32), s
    if dtype == "f16":
        s = x.astype(np.float16)
        return s.astype(np.float32), s
    return x.astype(np.float32), x.astype(np.float32)


def unpermute(w, n_head):
    """llama.cpp's converter permutes q and k rows: within a head, rows i and half + i become 2i
    and 2i + 1. This undoes it."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_safetensors_bf16(path, tensors):
    header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for a in blobs:
            f.write(a.tobytes())


ARCHS = {"llama": ("LlamaForCausalLM", "llama"), "qwen2": ("Qwen2ForCausalLM", "qwen2"), "qwen3": ("Qwen3ForCausalLM", "qwen3"),
         "phi3": ("Phi3ForCausalLM", "phi3"), "gemma2": ("Gemma2ForCausalLM", "gemma2"),
         "gemma3": ("Gemma3ForCausalLM", "gemma3_text")}


def model_cmd(src, out_dir, dtype, shards, gguf_out):
    r = GGUFReader(src)
    arch = field(r, "general.architecture")
    if arch not in ARCHS:
        sys.exit(f"{src}: architecture {arch}, not one of {', '.join(ARCHS)}")
    gemma = arch in ("gemma2", "gemma3")
    k = lambda key, d=None: field(r, f"{arch}.{key}", d)
    n_head, n_head_kv = k("attention.head_count"), k("attention.head_count_kv")
    n_embd, n_layer = k("embedding_length"), k("block_count")
    head_dim = k("attention.key_length", n_embd // n_head)
    tokens = field(r, "tokenizer.ggml.tokens")
    bos, eos = field(r, "tokenizer.ggml.bos_token_id"), field(r, "tokenizer.ggml.eos_token_id")
    names = [t.name for t in r.tensors]
    config = {
        "architectures": [ARCHS[arch][0]], "model_type": ARCHS[arch][1], "hidden_act": "silu",
        "hidden_size": n_embd, "intermediate_size": k("feed_forward_length"),
        "num_attention_heads": n_head, "num_key_value_heads": n_head_kv,
        "num_hidden_layers": n_layer, "head_dim": head_dim,
        "max_position_embeddings": k("context_length"), "rms_norm_eps": k("attention.layer_norm_rms_epsilon"),
        "rope_theta": k("rope.freq_base", 10000.0), "rope_scaling": None, "vocab_size": len(tokens),
        "tie_word_embeddings": "output.weight" not in names, "bos_token_id": bos, "eos_token_id": eos,
        "attention_bias": arch == "qwen2", "initializer_range": 0.02, "use_cache": True,
        "torch_dtype": {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[dtype],
    }
    n_rot = k("rope.dimension_count", head_dim)
    if n_rot != head_dim:
        config["partial_rotary_factor"] = n_rot * n_head / n_embd
    if gemma:
        every = 6 if arch == "gemma3" else 2   # one global layer in `every`, the last
        config.update({
            "hidden_activation": "gelu_pytorch_tanh", "sliding_window": k("attention.sliding_window"),
            "layer_types": ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(n_layer)],
            "query_pre_attn_scalar": head_dim, "final_logit_softcapping": k("final_logit_softcapping"),
            "attn_logit_softcapping": k("attn_logit_softcapping"),
        })
        if arch == "gemma3":
            config["rope_local_base_freq"] = k("rope.freq_base_swa", 10000.0)
        del config["hidden_act"]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    gguf_tensors, hf = [], {}
    for t in r.tensors:
        x = dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
        shift = gemma and t.name.endswith("norm.weight")   # Gemma's norms multiply by 1 + w; the GGUF holds w + 1
        as_f32, stored = rounded(x - np.float32(1) if shift else x, dtype)
        if shift:
            as_f32 = as_f32 + np.float32(1)
        # the converter's GGUF keeps 1-dimensional tensors (norms, biases) in F32
        gguf_tensors.append((t.name, as_f32 if x.ndim == 1 or dtype == "f32" else stored, x.ndim))
        if arch == "llama" and t.name.endswith("attn_q.weight"):
            stored = unpermute(stored, n_head)
        elif arch == "llama" and t.name.endswith("attn_k.weight"):
            stored = unpermute(stored, n_head_kv)
        hf[hf_name(t.name, arch)] = stored
    st_names = sorted(hf)
    if dtype == "bf16":
        if shards != 1:
            sys.exit("--shards: F16 and F32 only")
        write_safetensors_bf16(os.path.join(out_dir, "model.safetensors"), hf)
    else:
        from safetensors.numpy import save_file
        if shards == 1:
            save_file(hf, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
        else:
            weight_map, total = {}, 0
            for s in range(shards):
                part = {n: hf[n] for n in st_names[s::shards]}
                fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
                save_file(part, os.path.join(out_dir, fname), metadata={"format": "pt"})
                weight_map.update({n: fname for n in part})
                total += sum(a.nbytes for a in part.values())
            with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
    # the tokenizer
    if field(r, "tokenizer.ggml.model") == "gpt2":
        tok = make_tokenizer(r, field(r, "tokenizer.ggml.pre"))
    else:   # SentencePiece: Gemma's style when no space goes in front, else Llama 2's
        tok = make_spm_tokenizer(r, field(r, "tokenizer.ggml.add_space_prefix", True) is False)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    unk = field(r, "tokenizer.ggml.unknown_token_id", eos)
    pad = field(r, "tokenizer.ggml.padding_token_id", eos)
    tc = {"bos_token": tokens[bos], "eos_token": tokens[eos], "unk_token": tokens[unk], "pad_token": tokens[pad],
          "add_prefix_space": False, "clean_up_tokenization_spaces": False, "model_max_length": 8192}
    add_bos = field(r, "tokenizer.ggml.add_bos_token")
    if add_bos is not None:
        tc["add_bos_token"] = add_bos
    tmpl = field(r, "tokenizer.chat_template")
    eos_ids = eos
    if "<end_of_turn>" in tokens:   # Gemma's chat: the end of a turn ends a generation
        eos_ids = [eos, tokens.index("<end_of_turn>")]
        tmpl = tmpl or GEMMA_TEMPLATE
    if tmpl:
        tc["chat_template"] = tmpl
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos_ids, "_from_model_config": True}, f, indent=2)
    if gguf_out:
        w = GGUFWriter(gguf_out, arch)
        for name, f in r.fields.items():
            if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
                continue
            sub = f.types[-1] if f.types and f.types[0].name == "ARRAY" else None
            w.add_key_value(name, f.contents(), f.types[0], sub_type=sub)
        w.add_file_type({"bf16": 32, "f16": 1, "f32": 0}[dtype])
        if tmpl and "tokenizer.chat_template" not in r.fields:
            w.add_chat_template(tmpl)
        for name, a, ndim in gguf_tensors:
            raw = Q.BF16 if a.dtype == np.uint16 else None
            w.add_tensor(name, a, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def main(argv):
    if len(argv) >= 4 and argv[1] == "model":
        dtype, shards, gguf_out, rest = "bf16", 1, None, argv[4:]
        while rest:
            if rest[0] == "--dtype":
                dtype = rest[1]
            elif rest[0] == "--shards":
                shards = int(rest[1])
            elif rest[0] == "--gguf":
                gguf_out = rest[1]
            else:
                sys.exit(f"unknown option {rest[0]}")
            rest = rest[2:]
        model_cmd(argv[2], argv[3], dtype, shards, gguf_out)
    elif len(argv) in (6, 8) and argv[1] == "tokenizer" and (len(argv) == 6 or argv[6] == "--from"):
        tokenizer_cmd(argv[2], argv[3], argv[4], argv[5], argv[7] if len(argv) == 8 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
