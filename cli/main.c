// main.c — the llm program: the usage text and the commands. See cli.h for the files.
#include "cli.h"

#include <stdlib.h>
#include <string.h>

const char cli_usage[] =
    "usage: llm COMMAND [options]\n"
    "       llm -m FILE -p TEXT [options]   a flag in the command's place: run (as llama-cli)\n"
    "\n"
    "Flags with a value take it as the next argument or after '=' (--temp=0.5).\n"
    "\n"
    "commands:\n"
    "  run       generate text from a prompt\n"
    "  chat      talk with a model (a REPL; reads a conversation from a pipe too); -p TEXT or -f FILE:\n"
    "            one question, its answer, then the end\n"
    "  tokenize  print the tokens of a text, id and piece (works on vocabulary-only GGUF files)\n"
    "  detokenize  print the text of token ids (--tokens IDS, or ids on standard input)\n"
    "  info      print a model's metadata and tensors, also of files this build cannot run (it\n"
    "            says why); info --devices lists the GPUs this build can use (CUDA, Vulkan)\n"
    "  generate  run requests from a JSON Lines file together (continuous batching)\n"
    "  serve     an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions,\n"
    "            /v1/models, /health, /ready, /metrics, /tokenize, /detokenize) on the engine's batching\n"
    "  bench     prefill and decode speed of one sequence (as llama-bench: -p N prompt tokens,\n"
    "            -n N generated, -r N repetitions; defaults 512, 128, 5; prefill's int8 multiply-adds a\n"
    "            second against the CPU's peak measured beside it; --peak: that peak alone; -d N: both\n"
    "            after N tokens already in the sequence, as llama-bench -d); with\n"
    "            --num-prompts, --input-len, --output-len, --request-rate or --rag: the serving benchmark\n"
    "  pull      download a GGUF model from Hugging Face into the cache: llm pull REPO:QUANT\n"
    "            (e.g. unsloth/gemma-3-270m-it-GGUF:Q4_K_M) or llm pull REPO FILE; prints its path\n"
    "  list      the models in the cache: name, size, architecture, type, path (ls too)\n"
    "  rm        llm rm NAME: delete a model from the cache\n"
    "  quantize  llm quantize IN OUT TYPE: a GGUF file or Hugging Face directory to a GGUF file\n"
    "            of a llama-quantize type (q4_0, q8_0, q4_K_M, ...; llm quantize --help)\n"
    "  profile   time per module (attention, MLP, norms, logits, sampling, scheduling) over a\n"
    "            serving run (the bench flags; default 16 requests of 128 + 64 tokens)\n"
    "  perplexity  perplexity of a text (-f FILE), as llama.cpp's llama-perplexity computes it;\n"
    "            KL divergence against a base model's saved log-probabilities\n"
    "\n"
    "model and engine options:\n"
    "  -m, --model FILE|DIR|NAME GGUF model file (required), or a Hugging Face model directory\n"
    "                            (config.json, *.safetensors, tokenizer.json: llama, mistral,\n"
    "                            qwen2, qwen3, phi3, gemma2, gemma3; F32, F16, BF16, and\n"
    "                            AWQ (GEMM) and GPTQ 4/8-bit checkpoints); NAME (not a file): a\n"
    "                            model of the cache, by its name in llm list or a piece of it\n"
    "                            that no other model's name has, in any case (-m smollm2);\n"
    "                            hf://REPO:QUANT, hf://REPO/FILE: a model of a Hugging Face\n"
    "                            repository, as llm pull takes it, pulled first when it is not in\n"
    "                            the cache\n"
    "      --backend B           cpu (default), cuda (builds made with make CUDA=1), vulkan\n"
    "                            (make VULKAN=1), or auto (CUDA, else Vulkan, when built in and\n"
    "                            able to run the model, else cpu); CUDA's GEMM per weight type\n"
    "                            is its own or cuBLAS's, whichever it timed faster at load\n"
    "                            (LLM_CUDA_CUBLAS=0 / 1: always its own / cuBLAS's);\n"
    "                            LLM_CUDA_GRAPHS=0: no CUDA graphs\n"
    "      --device N            GPU of that backend (see llm info --devices; default: CUDA's\n"
    "                            device 0; Vulkan's first discrete GPU, else an integrated one)\n"
    "  -t, --threads N           CPU threads at most (default: the cores this process may use;\n"
    "                            each step runs on as many as measure fastest)\n"
    "  -c, --ctx-size, --max-model-len N  context length in tokens (default: the model's, at most\n"
    "                            4096; a warning when it is longer than the model was trained with)\n"
    "      --block-size N        KV cache block size: 8, 16 or 32 (default 16)\n"
    "      --kv-cache-memory B   KV cache bytes (default: a quarter of the free memory: the\n"
    "                            available RAM on the CPU, the GPU's left after the weights on\n"
    "                            Vulkan; at most what --max-num-seqs full contexts need, at least\n"
    "                            one context; on the CPU pages are touched only as blocks fill)\n"
    "      --kv-cache-dtype T    KV cache precision: f16 (default), f32, or q8_0 (llama.cpp's\n"
    "                            -ctk/-ctv q8_0: about half of f16's memory; head sizes that 32\n"
    "                            divides, on Vulkan 64)\n"
    "      --gpu-memory-utilization F  the KV cache's share of that free memory, in place of\n"
    "                            --kv-cache-memory's default quarter\n"
    "      --max-num-seqs N      requests computed together in a step (default 256; run, chat: 1)\n"
    "      --max-num-batched-tokens N  tokens per step (default 512); longer prompts are\n"
    "                            prefilled in chunks alongside the running requests' decodes\n"
    "      --speculative-model F draft model (-md): proposes tokens the model verifies in one pass\n"
    "                            (same vocabulary; e.g. the model at a lower type, or a smaller one)\n"
    "      --speculative-ngram   drafts from earlier occurrences of the last n tokens (prompt\n"
    "                            lookup; --prompt-lookup-min N, --prompt-lookup-max N: n, default 2-4)\n"
    "      --num-speculative-tokens K  drafts per request and step, at most (default 4; 1-16;\n"
    "                            --draft-max K too). Outputs are exactly those without drafts\n"
    "                            (greedy: identical); a step verifies drafts only where the measured\n"
    "                            step times and acceptance say it pays\n"
    "      --enable-prefix-caching  share the KV blocks of common prompt prefixes between\n"
    "                            requests and keep them after they finish (default off; serve: on,\n"
    "                            --no-enable-prefix-caching turns it off)\n"
    "      --scheduling-policy P fcfs or priority (lower \"priority\" first; default fcfs)\n"
    "      --no-mmap             read the model file into memory instead of mapping it (as\n"
    "                            llama.cpp's flag); mapped (the default), the file must not change\n"
    "                            while llm runs: truncated or rewritten in place, it ends llm with\n"
    "                            SIGBUS (a bus error); read, it may change or go after loading\n"
    "      --quantize TYPE       quantize the F32/F16/BF16 weights to TYPE as they load, on all\n"
    "                            threads (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_K, q3_K, q4_K,\n"
    "                            q5_K, q6_K, iq4_xs, f16, bf16): a GGUF file or a Hugging Face\n"
    "                            directory runs in a quarter of the memory at q4_0 (rows a K-quant\n"
    "                            does not divide fall back as llama-quantize's do: q4_K to q5_0)\n"
    "  -ngl, --n-gpu-layers N, -fa, --flash-attn [on|off|auto]  llama.cpp's flags, accepted: they\n"
    "                            change nothing here (--backend chooses the device, which runs every\n"
    "                            layer; attention is always a flash-style kernel); a note says so\n"
    "  -v, --verbose             run, chat: the seed and the engine's set-up on stderr\n"
    "\n"
    "prompt options (run, tokenize; detokenize: --tokens, --special):\n"
    "  -p, --prompt TEXT         prompt text\n"
    "  -f, --file FILE           read the prompt from a file (its bytes exactly; at most 1 GiB,\n"
    "                            run: at most the bytes the context's tokens can stand for)\n"
    "      --tokens IDS          run: the prompt as token ids, comma-separated (e.g. 1,15043);\n"
    "                            detokenize: the ids to turn into text\n"
    "      --no-bos              do not add the BOS token the vocabulary asks for\n"
    "      --special             text of special tokens (e.g. <|im_start|>) becomes those tokens\n"
    "                            (default off: such text is tokenized as plain text);\n"
    "                            detokenize: write the text of control tokens (e.g. <s>) too\n"
    "\n"
    "generation options (run, chat; both go through the engine's requests, as serving):\n"
    "  -n, --n-predict N         tokens to generate; chat: per answer (default run 64, chat\n"
    "                            unlimited: until the end of the turn or the context; -1: no limit;\n"
    "                            0: none, the prompt's tokens only, as max_tokens 0; not in chat)\n"
    "      --temp T              temperature, 0 = greedy (default 0.8)\n"
    "      --top-k K             keep the K most likely tokens, 0 = off (default 40)\n"
    "      --top-p P             keep the most likely tokens up to mass P, 1 = off (default 0.95)\n"
    "      --min-p P             drop tokens below P x the best one's probability, 0 = off\n"
    "                            (default 0.05)\n"
    "      --repeat-penalty X    penalise recent tokens' logits (/X if positive, xX if negative),\n"
    "                            1 = off (default 1)\n"
    "      --frequency-penalty X minus X per recent occurrence of a token (default 0)\n"
    "      --presence-penalty X  minus X for a token that occurred recently (default 0)\n"
    "      --repeat-last-n N     how many recent tokens the penalties look at (default 64)\n"
    "  -s, --seed S              random seed: the same seed gives the same text (default: a random\n"
    "                            one, shown by --json and -v; -1: random)\n"
    "      --stop TEXT           stop when TEXT is generated (not printed); repeatable, up to 16\n"
    "      --stop-token-ids IDS  stop at these token ids, comma-separated (besides end-of-\n"
    "                            generation tokens)\n"
    "      --ignore-eos          keep generating after an end-of-generation token\n"
    "\n"
    "structured output (run, chat, generate, bench, profile): the text follows a grammar; tokens\n"
    "  it refuses are never sampled, and the answer ends (finish_reason stop) as soon as the\n"
    "  grammar's text is whole\n"
    "      --grammar FILE        a grammar in llama.cpp's GBNF (start rule root; --grammar-file too)\n"
    "      --json-schema FILE    a JSON Schema: the text is a JSON value it accepts (type, properties,\n"
    "                            required, additionalProperties, enum, const, items, minItems,\n"
    "                            maxItems, anyOf, oneOf, $ref to $defs (recursion too), minLength,\n"
    "                            maxLength, pattern, format date / time / date-time / uuid, integer\n"
    "                            minimum / maximum); a keyword it cannot enforce exactly is refused\n"
    "      --json-object         any JSON object (OpenAI's json_object). Not --json: run --json is\n"
    "                            JSON output (the text and figures), whatever the text is\n"
    "  One of the three. chat: every answer follows it; generate: the default of every request line\n"
    "  (a line's grammar, json_schema or response_format replaces it). A file that cannot be read, a\n"
    "  grammar that does not compile or a schema keyword that is not supported: an error (exit 1)\n"
    "  before the model loads. Bound what the model may write (maxLength, maxItems, enum): a small\n"
    "  model can go on inside a string or an array until -n cuts it (finish_reason length)\n"
    "\n"
    "run output: the text as it comes, then prompt and decode speed on stderr; Ctrl-C stops it\n"
    "  (the text so far and the speed are printed; exit status 130)\n"
    "      --json                print one JSON object instead of the text stream: prompt_tokens,\n"
    "                            tokens, text, finish_reason (stop, length, abort; after length,\n"
    "                            length_limit: max_tokens, or context when the context or the KV\n"
    "                            cache cut it short), prompt_tps,\n"
    "                            decode_tps, seed\n"
    "      --logprobs K          with --json: the top K (at most 20) log-probabilities of every\n"
    "                            generated position, {\"id\",\"token\",\"logprob\"} (a token that is\n"
    "                            not UTF-8 on its own: U+FFFD in \"token\" and its \"bytes\":[...])\n"
    "\n"
    "chat options:\n"
    "      --chat-template NAME  chatml, llama3, llama2, mistral, zephyr, gemma, phi3, qwen3 or harmony\n"
    "                            (default: recognised from the model file, else chatml)\n"
    "  -sys, --system TEXT       system prompt\n"
    "  in the chat: /reset forgets the conversation, /system TEXT sets the system prompt and\n"
    "  resets, /stats shows speed, cached prompt tokens and context use, /quit (or Ctrl-D) leaves;\n"
    "  Ctrl-C stops an answer (at the prompt it quits); a line ending in \\ goes on on the next\n"
    "  (a message of at most 16 MiB).\n"
    "  Each turn sends the whole conversation; the prefix cache (always on in chat) finds the\n"
    "  earlier turns, so only the new text is computed. When a message would leave less than a\n"
    "  quarter of the context (or -n tokens) for the answer, the oldest turns are dropped (the\n"
    "  system prompt stays). With libedit (Debian: libedit-dev): line editing, and a history in\n"
    "  ${XDG_STATE_HOME:-~/.local/state}/llm.c/chat_history\n"
    "\n"
    "generate options:\n"
    "      --requests FILE       one JSON request per line (- reads standard input):\n"
    "                            {\"prompt\":\"...\"} or {\"tokens\":[...]}, and optionally \"max_tokens\"\n"
    "                            (default -n, else 16), \"temperature\", \"top_p\", \"top_k\" (-1 or 0:\n"
    "                            off), \"min_p\", \"seed\" (0 to 2^63 - 1), \"priority\" (a 32-bit\n"
    "                            integer), \"stop\" (a string or an array of\n"
    "                            them), \"stop_token_ids\", \"ignore_eos\", \"repetition_penalty\",\n"
    "                            \"presence_penalty\", \"frequency_penalty\", \"logprobs\" (0-20), \"n\"\n"
    "                            (only 1), \"grammar\" (GBNF text), \"json_schema\" (a JSON Schema),\n"
    "                            \"response_format\" (serve's: text, json_object, json_schema; one of\n"
    "                            these three, in place of the structured output flags); null means\n"
    "                            the default; other sampling defaults come from the flags above. A\n"
    "                            line that is not such an object (bad JSON, not UTF-8, an unknown or\n"
    "                            unsupported field, a value out of range, a grammar that does not\n"
    "                            compile, a schema keyword that is not supported) is an error line;\n"
    "                            the others run. Limits: a line of at most 16 MiB,\n"
    "                            1,048,576 requests and 1 GiB in all (beyond them nothing runs).\n"
    "                            Prints one JSON line per request, in\n"
    "                            input order: index, prompt_tokens, tokens, text, finish_reason\n"
    "                            (and length_limit, as run --json),\n"
    "                            ttft_ms, logprobs (per generated position the top K as {id, token,\n"
    "                            logprob}) when asked for, error for a request that could not run\n"
    "\n"
    "serve options (and the engine flags above; prefix caching is on: --no-enable-prefix-caching):\n"
    "      --host H              address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)\n"
    "      --port N              port (default 8080; 0: any free one, named on stderr)\n"
    "      --api-key KEY         clients must send Authorization: Bearer KEY (not /health, /ready, /metrics)\n"
    "      --served-model-name NAME  the model's id in the API (default: the file's name, no .gguf)\n"
    "      --chat-template NAME  the chat template (default: the model's; chatml when llm knows none)\n"
    "      --max-queued-requests N  sequences queued beyond --max-num-seqs before answers are 429\n"
    "                            (default 1024)\n"
    "      --max-body-size B     largest request body in bytes (default 16 MiB; 413 beyond)\n"
    "      --max-body-memory B   request bodies held at once, all together (1 MiB of one at its\n"
    "                            headers, the rest as it comes), and what parsing them holds\n"
    "                            (48-256 bytes a JSON value) (default 256 MiB, at least\n"
    "                            --max-body-size; beyond it 503 with Retry-After; 413 for a body\n"
    "                            whose parse alone is more)\n"
    "      --timeout S           close a connection idle or silent for S seconds (default 60)\n"
    "      --header-timeout S    close a connection whose request line and headers are not all in S\n"
    "                            seconds after it opened or its last answer ended (default 10;\n"
    "                            an idle keep-alive connection too), however steadily they trickle\n"
    "      --body-min-rate B     a body must keep coming at B bytes/s: its connection is closed\n"
    "                            (408) once --header-timeout seconds + 1 s per B bytes received\n"
    "                            have passed since its headers (default 4096; 0: no limit)\n"
    "      --max-connections N   connections at once, a thread each (default 512); beyond them a new\n"
    "                            one closes the one that has waited longest for its request header,\n"
    "                            and when none waits, 16 more may only ask GET /health, /ready, /metrics\n"
    "                            (others get 503 with Retry-After)\n"
    "      --max-connections-per-ip N  connections from one address (default a quarter of\n"
    "                            --max-connections; 0: no limit); beyond them closed at once\n"
    "      --shutdown-timeout S  SIGINT/SIGTERM: drain (GET /ready and every new request but /health\n"
    "                            and /metrics answer 503 with Retry-After), let requests in flight\n"
    "                            finish for S seconds (default 10), abort the rest (their last\n"
    "                            events: up to 5 s more), exit 0\n"
    "      --replica-id ID       an X-Replica-Id: ID header on every answer (which replica of a fleet\n"
    "                            answered)\n"
    "      --ready-max-waiting N  GET /ready answers 503 while N or more sequences wait for the\n"
    "                            running batch (default: --max-queued-requests, the queue full) and\n"
    "                            while draining\n"
    "      --log-format F        the request log on stderr, a line per request as it ends: text (the\n"
    "                            default: TIME CLIENT METHOD PATH STATUS prompt=N completion=N\n"
    "                            ttft=Xms total=Xms, then aborted and error=\"MESSAGE\" when they\n"
    "                            apply; '-': not applicable) or json (an object a line: time,\n"
    "                            client, method, path, status, prompt_tokens, completion_tokens,\n"
    "                            ttft_ms, total_ms, aborted, error); TIME in UTC (ISO 8601, ms)\n"
    "      --quiet               no request log (the startup line and errors still print)\n"
    "  Requests default to OpenAI's sampling (temperature 1, no cut-offs, a random seed; sampling\n"
    "  flags given here replace those defaults) and max_tokens up to the context's end.\n"
    "  Structured output: OpenAI's response_format {\"type\": \"json_object\"} (any JSON object) or\n"
    "  {\"type\": \"json_schema\", \"json_schema\": {\"name\", \"schema\", \"strict\"}} (the schema is\n"
    "  enforced, strict or not), llama-server's \"grammar\" (GBNF) and \"json_schema\" (a schema);\n"
    "  one per request, every choice follows it, streamed or not; a schema keyword that is not\n"
    "  supported or a grammar that does not compile: 400, naming the field (llm run --help: what\n"
    "  a schema may hold)\n"
    "\n"
    "serving benchmark options (bench, profile), with vLLM's names:\n"
    "      --num-prompts N       requests (default 64; profile 16)\n"
    "      --input-len L         prompt tokens each, random ids (default 128)\n"
    "      --output-len O        tokens generated each, greedy, end-of-text ignored (default 128;\n"
    "                            profile 64; --rag 32)\n"
    "      --request-rate R      requests per second, Poisson arrivals (default: all at once)\n"
    "      --base-url URL        bench: send the workload to an OpenAI-compatible server (llm serve,\n"
    "                            llama-server, vLLM) at URL: POST URL/v1/completions, token-id prompts\n"
    "                            from -m's vocabulary, greedy, ignore_eos, streamed; prints the same\n"
    "                            throughput, TTFT and ITL figures (the server's engine figures aside)\n"
    "                            and the failed requests (exit status 1 when any failed); --api-key KEY\n"
    "      --max-concurrency N   bench --base-url: at most N requests at once (default: all)\n"
    "      --seed S              random prompts and arrivals (default 0)\n"
    "      --rag                 one shared context and several questions, to show prefix caching:\n"
    "      --context-len C       shared context tokens (default 2000)\n"
    "      --questions Q         questions, each the context + 32 tokens (default 8)\n"
    "      --json-schema FILE, --grammar FILE, --json-object  every request follows it (structured\n"
    "                            output below), end-of-text not ignored: a text ends with the\n"
    "                            grammar's or at --output-len; prints the grammar's time per token\n"
    "                            and its share of the run; --base-url: sent as llama-server's\n"
    "                            json_schema or grammar field\n"
    "      --json                bench: one JSON object: requests, elapsed_s, output_tps,\n"
    "                            total_tps, ttft_ms and itl_ms {p50, p90, p99}, kv_utilization,\n"
    "                            prefix_hit_rate, ..., grammar {tokens, ms_per_token, share, masks,\n"
    "                            mask_hits} under a grammar; bench -p/-n: model, device, pp_tps,\n"
    "                            tg_tps, ...; profile: modules [{module, ms, share}], totals,\n"
    "                            steps, threads\n"
    "\n"
    "perplexity options (llama-perplexity's figures for the same model, text and -c; a KV cache in\n"
    "f32 on both sides, llama-perplexity -ctk f32 -ctv f32 -fa off, agrees closest):\n"
    "  -f, --file FILE           the text (one trailing newline dropped, as llama-perplexity), tokenized\n"
    "                            with BOS and cut into chunks of -c tokens; it needs 2 x -c tokens at\n"
    "                            least. Each chunk is evaluated alone, its first token replaced by BOS\n"
    "                            when the vocabulary adds one, and its second half scored. Prints the\n"
    "                            running estimate after each chunk ([1]12.3456,[2]...), then\n"
    "                            'Final estimate: PPL = X +/- Y' (Y: the standard error)\n"
    "  -c, --ctx-size N          tokens per chunk (default 512)\n"
    "      --chunks K            the first K chunks only (default: all)\n"
    "  -b, --batch-size N        tokens evaluated per call (default 2048, at most -c; memory: N x the\n"
    "                            vocabulary's floats); the figures do not depend on it\n"
    "      --kl-divergence-base FILE  also write the log-probabilities of every scored token to FILE\n"
    "                            (llama-perplexity's format: either program reads the other's files)\n"
    "      --kl-divergence       with --kl-divergence-base FILE: evaluate the tokens of FILE (-f is\n"
    "                            not needed; -c is FILE's) and compare this model with the base: per\n"
    "                            chunk PPL, ln(PPL(Q)/PPL(base)), KL divergence, RMS of the change of\n"
    "                            the right token's probability, same top token; then the summary\n"
    "                            statistics of llama-perplexity (with 100 scored tokens or more)\n"
    "\n"
    "models (pull, list, rm; -m NAME):\n"
    "  The cache: ${XDG_CACHE_HOME:-~/.cache}/llm.c/hf/OWNER/NAME/FILE, the files llm pull\n"
    "  downloaded (FILE.part while it downloads: the next pull resumes it; the size and the sha256\n"
    "  are checked; LLM_HF_ENDPOINT replaces https://huggingface.co). A model's NAME is its path\n"
    "  there less .gguf: unsloth/gemma-3-270m-it-GGUF/gemma-3-270m-it-Q4_K_M.\n"
    "  llm pull REPO:QUANT       the GGUF model of repository REPO (OWNER/NAME) whose file name holds\n"
    "                            QUANT as a word, in any case (Q4_K_M: not IQ4_K_M or Q4_K_M_L;\n"
    "                            mmproj and imatrix files are no models), from the repository's file\n"
    "                            list; none or several: an error listing its models. A model split\n"
    "                            in parts (NAME-00001-of-00003.gguf, ...) is pulled whole\n"
    "  llm pull REPO             Q4_K_M, else Q8_0, else the repository's only GGUF model\n"
    "  llm pull REPO FILE        that file of the repository (any file)\n"
    "  llm pull hf://REPO:QUANT, hf://REPO/FILE  the same; prints the path of the (first) file\n"
    "  llm list [--json]         per model: NAME, SIZE, ARCH (architecture), TYPE (the file type:\n"
    "                            Q4_K_M, F16, ...; not GGUF: a file that is no readable GGUF), PATH\n"
    "  llm rm NAME...            delete the models (every part) and the folders they leave empty in\n"
    "                            the cache; several models named: an error, nothing deleted\n"
    "  -m NAME, llm rm NAME      a model of the cache by its NAME, its file's name, or a piece of the\n"
    "                            name that no other model's has, in any case (-m smollm2); a path\n"
    "                            that exists is a path\n"
    "\n"
    "info options:\n"
    "      --tensors             list every tensor: name, type, shape\n"
    "      --json                one JSON object: file, format (gguf or huggingface), gguf_version\n"
    "                            (0 for a directory), architecture, name, shape,\n"
    "                            parameters, context, unsupported (why it cannot run, or null),\n"
    "                            metadata (arrays as {type, length}), tensors per type\n"
    "                            (tensor_list with --tensors)\n"
    "\n"
    "tokenize output (default: one token a line, id -> 'piece', escaped as \\n, \\xHH):\n"
    "      --ids                 only the ids, separated by spaces (--json: a JSON array of ids)\n"
    "      --json                [{\"id\":..,\"piece\":\"..\"}]; a piece that is not UTF-8 on its own\n"
    "                            (part of a character) has U+FFFD for its bytes, and \"bytes\":[..]\n"
    "\n"
    "detokenize output: the text, byte for byte (a newline is added on a terminal only)\n"
    "      --json                {\"text\":\"..\"}\n"
    "\n"
    "  -h, --help                this help\n"
    "      --version             print the version\n";

// The usage text is blocks apart by blank lines, each under a header line ("chat options:");
// a command's help is its usage line, its lines of the "commands:" block and the blocks that
// concern it.
static const struct { const char *cmd, *args, *blocks[5]; } cli_help_blocks[] = {
    {"run", "[options]", {"prompt options", "generation options", "structured output", "run output",
                          "model and engine options"}},
    {"chat", "[options]", {"chat options", "generation options", "structured output", "model and engine options"}},
    {"tokenize", "[options]", {"prompt options", "tokenize output", "model and engine options"}},
    {"detokenize", "[options]", {"prompt options", "detokenize output", "model and engine options"}},
    {"info", "[options]", {"info options", "model and engine options"}},
    {"generate", "[options]", {"generate options", "generation options", "structured output",
                               "model and engine options"}},
    {"serve", "[options]", {"serve options", "generation options", "model and engine options"}},
    {"bench", "[options]", {"serving benchmark options", "structured output", "model and engine options"}},
    {"profile", "[options]", {"serving benchmark options", "structured output", "model and engine options"}},
    {"perplexity", "[options]", {"perplexity options", "model and engine options"}},
    {"pull", "REPO[:QUANT] | REPO FILE | hf://REPO[:QUANT] | hf://REPO/FILE", {"models"}},
    {"list", "[--json]", {"models"}},
    {"rm", "NAME...", {"models"}},
};

// The block of the usage text whose header starts with title (from its header to the blank line
// after it), or NULL; *n its length.
static const char *cli_usage_block(const char *title, size_t *n) {
    for (const char *p = cli_usage; p && *p; p = strstr(p, "\n\n"), p = p ? p + 2 : NULL) {
        if (strncmp(p, title, strlen(title)) != 0) continue;
        const char *end = strstr(p, "\n\n");
        *n = end ? (size_t)(end - p) + 1 : strlen(p);
        return p;
    }
    return NULL;
}

// The lines of the "commands:" block that describe cmd (its line and those indented under it).
static void cli_print_command_lines(const char *cmd) {
    size_t n;
    const char *b = cli_usage_block("commands:", &n), *end = b ? b + n : NULL;
    for (const char *l = b; l && l < end;) {
        const char *nl = memchr(l, '\n', (size_t)(end - l));
        size_t len = nl ? (size_t)(nl - l) + 1 : (size_t)(end - l);
        size_t k = strlen(cmd);
        if (!strncmp(l, "  ", 2) && !strncmp(l + 2, cmd, k) && l[2 + k] == ' ') {
            fwrite(l, 1, len, stdout);
            for (l += len; l < end && !strncmp(l, "            ", 12); l += len) {
                nl = memchr(l, '\n', (size_t)(end - l));
                len = nl ? (size_t)(nl - l) + 1 : (size_t)(end - l);
                fwrite(l, 1, len, stdout);
            }
            return;
        }
        l += len;
    }
}

void cli_print_command_help(const char *cmd) {
    for (size_t i = 0; i < sizeof(cli_help_blocks) / sizeof(cli_help_blocks[0]); i++) {
        if (strcmp(cli_help_blocks[i].cmd, cmd) != 0) continue;
        printf("usage: llm %s %s\n\n", cmd, cli_help_blocks[i].args);
        cli_print_command_lines(cmd);
        for (int j = 0; j < 5 && cli_help_blocks[i].blocks[j]; j++) {
            size_t n;
            const char *b = cli_usage_block(cli_help_blocks[i].blocks[j], &n);
            if (b) { putchar('\n'); fwrite(b, 1, n, stdout); }
        }
        printf("\nFlags with a value take it as the next argument or after '=' (--temp=0.5). Every command "
               "and flag: llm --help\n");
        return;
    }
    fputs(cli_usage, stdout);
}

// Bare llm: what it is, the commands, where to read more.
static void cli_print_overview(FILE *f) {
    size_t n;
    const char *b = cli_usage_block("commands:", &n);
    fputs("llm: a portable LLM inference engine and its program (GGUF and Hugging Face models; CPU, Vulkan,\n"
          "CUDA). Ask a model one question: llm chat -m MODEL.gguf -p \"...\"\n\n", f);
    if (b) fwrite(b, 1, n, f);
    fputs("\nllm COMMAND --help: a command's options; llm --help: every command and flag; README.md and\n"
          "docs/: the manual.\n", f);
}

// The flags, and -m hf://... or NAME made the cached file's path (pulled first when missing; see
// cli_model_path), the same for --speculative-model; what they allocate is freed by done().
static void parse_args(int argc, char **argv, struct cli *c) {
    cli_parse_args(argc, argv, c);
    if ((c->model_alloc = cli_model_path(c->ep.model_path))) c->ep.model_path = c->model_alloc;
    if ((c->draft_alloc = cli_model_path(c->ep.speculative_model))) c->ep.speculative_model = c->draft_alloc;
}

// A command's exit status, after what parse_args allocated is freed.
static int done(struct cli *c, int rc) {
    free(c->model_alloc);
    free(c->draft_alloc);
    free(c->grammar);
    free(c->json_schema);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        cli_print_overview(stderr);
        return 1;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) { fputs(cli_usage, stdout); return 0; }
    if (!strcmp(argv[1], "help")) {   // llm help [COMMAND]
        if (argc > 2) cli_print_command_help(argv[2]);
        else fputs(cli_usage, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) { printf("llm %s\n", LLM_VERSION); return 0; }
    struct cli c;
    memset(&c, 0, sizeof(c));
    if (argv[1][0] == '-' && argv[1][1]) {   // a flag where the command goes (llama-cli's habit): run
        char **args = malloc(((size_t)argc + 2) * sizeof(char *));
        if (!args) cli_die("out of memory");
        args[0] = argv[0];
        args[1] = "run";
        memcpy(args + 2, argv + 1, (size_t)argc * sizeof(char *));   // argv[argc] is NULL too
        parse_args(argc + 1, args, &c);
        int rc = cli_cmd_run(&c);
        free(args);
        return done(&c, rc);
    }
    if (!strcmp(argv[1], "pull")) return cli_cmd_pull(argc, argv);
    if (!strcmp(argv[1], "list") || !strcmp(argv[1], "ls")) return cli_cmd_list(argc, argv);
    if (!strcmp(argv[1], "rm")) return cli_cmd_rm(argc, argv);
    if (!strcmp(argv[1], "quantize")) return cli_cmd_quantize(argc, argv);
    if (!strcmp(argv[1], "run")) { parse_args(argc, argv, &c); return done(&c, cli_cmd_run(&c)); }
    if (!strcmp(argv[1], "chat")) { parse_args(argc, argv, &c); return done(&c, cli_cmd_chat(&c)); }
    if (!strcmp(argv[1], "tokenize")) { parse_args(argc, argv, &c); return done(&c, cli_cmd_tokenize(&c)); }
    if (!strcmp(argv[1], "detokenize")) { parse_args(argc, argv, &c); return done(&c, cli_cmd_detokenize(&c)); }
    if (!strcmp(argv[1], "info") && argc == 3 && !strcmp(argv[2], "--devices")) return cli_cmd_devices();
    if (!strcmp(argv[1], "info")) { parse_args(argc, argv, &c); return done(&c, cli_cmd_info(&c)); }
    if (!strcmp(argv[1], "perplexity")) { parse_args(argc, argv, &c); return done(&c, cli_cmd_perplexity(&c)); }
    if (!strcmp(argv[1], "generate")) { parse_args(argc, argv, &c); return done(&c, cli_cmd_generate(&c)); }
    if (!strcmp(argv[1], "serve")) { parse_args(argc, argv, &c); return done(&c, cli_cmd_serve(&c)); }
    if (!strcmp(argv[1], "bench") || !strcmp(argv[1], "profile")) {
        parse_args(argc, argv, &c);
        bool profile = !strcmp(argv[1], "profile");
        if (!c.serve && !profile) return done(&c, cli_cmd_bench(&c));
        if (!c.num_prompts) c.num_prompts = profile ? 16 : 64;
        if (!c.input_len) c.input_len = 128;
        if (!c.output_len) c.output_len = c.rag ? 32 : profile ? 64 : 128;
        if (!c.context_len) c.context_len = 2000;
        if (!c.questions) c.questions = 8;
        c.question_len = 32;
        if (!c.ep.max_model_len) {   // room for the longest request
            int need = (c.rag ? c.context_len + c.question_len : c.input_len) + c.output_len;
            c.ep.max_model_len = CLI_MAX(need, 256);
        }
        if (c.base_url && !profile) return done(&c, cli_cmd_bench_http(&c));
        return done(&c, profile ? cli_cmd_profile(&c) : cli_cmd_bench_serve(&c));
    }
    cli_die("unknown command '%s' (see llm --help)", argv[1]);
}
