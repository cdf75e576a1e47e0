#!/bin/sh
# bench/quant_tools.sh: AWQ and GPTQ checkpoints of the real SmolLM2-135M-Instruct written by a
# real tool on the CPU, GPTQModel (PyPI), for bench/quant.sh's reference rows and for checking by
# hand that the engine reads what the tool wrote. Not run by CI: it downloads torch (about 1 GB
# with its dependencies) and quantizes for about 10 (GPTQ) and 20 (AWQ) minutes on 2 cores.
#
#   build/bench/quant/tools/venv        torch (CPU), transformers 5.24, GPTQModel 7.7.0
#   build/bench/quant/tools/gptq-g128      GPTQ 4-bit, group 128, symmetric, checkpoint_format gptq
#   build/bench/quant/tools/gptq-g128-act  the same with act-order (desc_act)
#   build/bench/quant/tools/awq-g64        AWQ 4-bit, group 64, zero points, GEMM (g128 is not
#                                          possible: AWQ's groups must divide SmolLM2's 576)
#
# Calibration: 32 windows of 256 tokens of /usr/share/common-licenses/GPL-3 (bench/quant.sh
# measures on other texts). The base: $LLM_FIXTURES/hf/smollm2-f16 (make fixtures), BASE= another.
# Then it prints the CHECKPOINTS= line for bench/quant.sh. Each step is skipped when its output
# exists; remove the folder to redo it.
set -eu
FIXTURES=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}
BASE=${BASE:-$FIXTURES/hf/smollm2-f16}
out=build/bench/quant/tools
venv=$out/venv
[ -d "$BASE" ] || { echo "bench/quant_tools.sh: $BASE not found (make fixtures)" >&2; exit 1; }
mkdir -p "$out"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import gptqmodel" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    # torch's CPU build where its index is reachable, else PyPI's (larger: CUDA libraries it does not use here)
    "$venv/bin/pip" install -q torch==2.15.0 --index-url https://download.pytorch.org/whl/cpu ||
        "$venv/bin/pip" install -q torch==2.15.0
    "$venv/bin/pip" install -q transformers==5.24.0 gptqmodel==7.7.0
fi
cat > "$out/quantize.py" <<'EOF'
# GPTQModel on the CPU: python quantize.py BASE OUT gptq|awq GROUP DESC_ACT
import os
os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")   # (GPTQModel's default of 1 worker fails on 2 cores)
import shutil, sys
import torch
from transformers import AutoTokenizer
from gptqmodel import GPTQModel, GPTQConfig, AWQConfig
from gptqmodel.quantization import FORMAT
base, out, method, group, desc_act = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(base)
ids = tok(open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read(), add_special_tokens=False)["input_ids"]
n, seq = 32, 256
stride = (len(ids) - seq) // (n - 1)
calib = [{"input_ids": ids[i * stride:i * stride + seq], "attention_mask": [1] * seq} for i in range(n)]
if method == "gptq":
    cfg = GPTQConfig(bits=4, group_size=group, sym=True, desc_act=desc_act, act_group_aware=False, device="cpu")
else:
    cfg = AWQConfig(bits=4, group_size=group, sym=False, format=FORMAT.GEMM, device="cpu")
model = GPTQModel.load(base, cfg, dtype=torch.float16)
model.quantize(calib, batch_size=1, tokenizer=tok)
model.save(out)
for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
    if not os.path.exists(os.path.join(out, f)):
        shutil.copy(os.path.join(base, f), os.path.join(out, f))
EOF
for spec in "gptq-g128 gptq 128 0" "gptq-g128-act gptq 128 1" "awq-g64 awq 64 0"; do
    set -- $spec
    [ -f "$out/$1/config.json" ] && continue
    echo "bench/quant_tools.sh: $1 (GPTQModel, a few minutes)" >&2
    "$venv/bin/python" "$out/quantize.py" "$BASE" "$out/$1.tmp" "$2" "$3" "$4" > "$out/$1.log" 2>&1 ||
        { tail -n 20 "$out/$1.log" >&2; exit 1; }
    rm -rf "$out/$1" && mv "$out/$1.tmp" "$out/$1"
done
echo "CHECKPOINTS=\"gptq-g128=$out/gptq-g128 gptq-g128-act=$out/gptq-g128-act awq-g64=$out/awq-g64\""
