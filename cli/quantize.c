// quantize.c — llm quantize IN OUT TYPE: a model's weights to a llama-quantize file type, as a
// GGUF file; llm quantize IN OUT --method gptq|awq --calib FILE: calibrated, as an AWQ / GPTQ
// checkpoint or a GGUF file (llm_quantize); a progress bar on a terminal.
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char quantize_usage[] =
    "usage: llm quantize [options] IN OUT [TYPE]\n"
    "       llm quantize --method gptq|awq --calib FILE [options] IN OUT [TYPE]\n"
    "  IN    a GGUF file or a Hugging Face model directory (F32, F16, BF16 weights); or a model of\n"
    "        llm pull's cache by name (llm list), hf://REPO:QUANT or hf://REPO/FILE, as -m takes them\n"
    "  OUT   the GGUF file to write (written as OUT.part, renamed when complete); neither it nor\n"
    "        OUT.part may be IN (or the --calib text) or lie inside IN\n"
    "  TYPE  (or --type TYPE) a llama-quantize file type: q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl,\n"
    "        iq4_xs, q2_K, q3_K_S, q3_K_M (q3_K), q3_K_L, q4_K_S, q4_K_M (q4_K, the default),\n"
    "        q5_K_S, q5_K_M (q5_K), q6_K, mxfp4_moe, f16, bf16, f32. The matrices get\n"
    "        llama-quantize's mix: the output projection (or a tied embedding) at q6_K (q8_0 when\n"
    "        256 does not divide its rows), attn_v and ffn_down of some layers at more bits in the\n"
    "        _M and _L types, rows a K-quant does not divide at its fallback (q4_K to q5_0, ...);\n"
    "        mxfp4_moe: a mixture of experts' experts at mxfp4, every other matrix at q8_0; 1-D\n"
    "        tensors are copied. q4_0, q4_1, q5_0, q5_1, q8_0, mxfp4_moe and the float types give\n"
    "        llama-quantize's bytes.\n"
    "options:\n"
    "  --type TYPE           the file type\n"
    "  --pure                every matrix at TYPE itself (no mix; llama-quantize --pure)\n"
    "  --allow-requantize    requantize matrices that are quantized already (AWQ/GPTQ directories,\n"
    "                        quantized GGUF files); without it such a matrix is an error\n"
    "  -t, --threads N       threads (default: the cores this process may use)\n"
    "calibrated quantization (the engine runs the model over the text and quantizes each layer's\n"
    "matrices by what their inputs were):\n"
    "  --method M            gptq: each row rounded column by column, the errors spread over the\n"
    "                        columns left through the inverse of the inputs' X X^T (Hessian);\n"
    "                        awq: per input channel scales searched to protect the channels with\n"
    "                        large activations, folded into the norm or matrix before, then each\n"
    "                        group's range clipped (searched); rtn (default): rounding to nearest\n"
    "  --calib FILE          the calibration text (required with gptq or awq)\n"
    "  --format F            hf (default with gptq or awq): OUT is a directory, an AWQ (GEMM) or\n"
    "                        GPTQ (gptq_v2: asymmetric) checkpoint as AutoAWQ / GPTQModel write\n"
    "                        them (GPTQModel and llm load it; IN must be a Hugging Face directory,\n"
    "                        whose other files are copied; OUT must not exist or be empty);\n"
    "                        gguf: OUT is a GGUF file of TYPE (as above, llama-quantize's mix) whose\n"
    "                        layer matrices the method quantized (llama.cpp loads it)\n"
    "  --bits N              hf: 4 (default) or 8 (gptq)\n"
    "  --group-size N        hf: 32, 64, 128 (default) or -1 (one group a row)\n"
    "  --samples N           calibration windows, at most (default 128)\n"
    "  --seq-len N           tokens a window (default 512)\n"
    "  --act-order           gptq, hf: columns by decreasing activation energy (desc_act, g_idx)\n"
    "  --damp X              gptq: dampening, a share of the Hessian's mean diagonal (default 0.01)\n"
    "  -h, --help            this help\n";

struct quantize_bar { bool tty; int shown; };

static void quantize_progress(void *user, double done, const char *tensor) {
    struct quantize_bar *b = user;
    const int pct = (int)(done * 100.0 + 0.5);
    if (!b->tty || pct == b->shown) return;
    b->shown = pct;
    char bar[31];
    const int fill = (int)(done * 30.0 + 0.5);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r[%s] %3d%% %-40.40s", bar, pct, tensor);
    fflush(stderr);
}

int cli_cmd_quantize(int argc, char **argv) {
    struct llm_quantize_params p = llm_quantize_params_default();
    const char *pos[3] = {NULL, NULL, NULL};
    const char *type = NULL;
    int n_pos = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        const size_t n = a[0] == '-' && a[1] == '-' && eq ? (size_t)(eq - a) : strlen(a);
#define FLAG(s) (strlen(s) == n && !strncmp(a, s, n))
#define VALUE() (eq && a[1] == '-' ? eq + 1 : i + 1 < argc ? argv[++i] : (cli_die("%s needs a value", a), ""))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(quantize_usage, stdout); return 0; }
        else if (FLAG("--type")) type = VALUE();
        else if (!strcmp(a, "--pure")) p.pure = 1;
        else if (!strcmp(a, "--allow-requantize")) p.allow_requantize = 1;
        else if (FLAG("-t") || FLAG("--threads")) p.n_threads = (int)cli_parse_int("--threads", VALUE(), 1, 1024);
        else if (FLAG("--method")) p.method = VALUE();
        else if (FLAG("--calib")) p.calib_path = VALUE();
        else if (FLAG("--format")) p.format = VALUE();
        else if (FLAG("--bits")) p.bits = (int)cli_parse_int("--bits", VALUE(), 2, 8);
        else if (FLAG("--group-size")) p.group_size = (int)cli_parse_int("--group-size", VALUE(), -1, 1 << 20);
        else if (FLAG("--samples") || FLAG("--nsamples"))
            p.n_samples = (int)cli_parse_int("--samples", VALUE(), 1, 1 << 20);
        else if (FLAG("--seq-len")) p.seq_len = (int)cli_parse_int("--seq-len", VALUE(), 1, 1 << 20);
        else if (!strcmp(a, "--act-order") || !strcmp(a, "--desc-act")) p.act_order = 1;
        else if (FLAG("--damp")) p.damp = cli_parse_float("--damp", VALUE(), 1e-6, 10.0);
        else if (a[0] == '-' && a[1]) cli_die("quantize: unknown flag '%s' (see llm quantize --help)", a);
        else if (n_pos < 3) pos[n_pos++] = a;
        else cli_die("quantize: too many arguments (see llm quantize --help)");
#undef FLAG
#undef VALUE
    }
    if (n_pos < 2) {
        fputs(quantize_usage, stderr);
        return 1;
    }
    if (pos[2] && type && strcmp(pos[2], type) != 0)
        cli_die("quantize: two types given: '%s' and --type %s", pos[2], type);
    const bool hf = p.format ? !strcmp(p.format, "hf") : p.method && strcmp(p.method, "rtn") != 0;
    if (hf && (pos[2] || type))
        cli_die("quantize: a file type is for GGUF output (--format gguf); a checkpoint's are --bits and --group-size");
    if (p.group_size == 0 && argc > 2)
        for (int i = 2; i < argc; i++)
            if (!strncmp(argv[i], "--group-size", 12)) cli_die("quantize: --group-size 0: 32, 64, 128 or -1 (a row)");
    char *in = cli_model_path(pos[0]);   // a model of the cache by name, hf://...
    p.input = in ? in : pos[0];
    p.output = pos[1];
    if (pos[2] || type) p.type = pos[2] ? pos[2] : type;
    struct quantize_bar bar = {isatty(2) != 0, -1};
    p.progress = quantize_progress;
    p.progress_user = &bar;
    struct llm_quantize_stats s;
    char err[600];
    const double t0 = cli_now();
    enum llm_status st = llm_quantize(&p, &s, err, sizeof(err));
    if (bar.tty && bar.shown >= 0) fprintf(stderr, "\r%80s\r", "");
    free(in);
    if (st) cli_die("%s", err);
    // a calibrated checkpoint (gptq, awq): the bits per weight are those of the layers' matrices
    bool layers = p.method && strcmp(p.method, "rtn") && (!p.format || !strcmp(p.format, "hf"));
    fprintf(stderr, "llm: %s: %d tensors, %d quantized (%d at a fallback type); %.2f MiB -> %.2f MiB (%.2f bits per "
            "weight%s) in %.1f s\n", p.output, s.n_tensors, s.n_quantized, s.n_fallback, (double)s.bytes_in / 1048576.0,
            (double)s.bytes_out / 1048576.0, s.n_params ? 8.0 * (double)s.bytes_out / (double)s.n_params : 0.0,
            layers ? ", the layers' matrices" : "", cli_now() - t0);
    return 0;
}
