"""Run llama.cpp's HTTP server in-process (xllamacpp) for infergate.

Run by the venv that scripts/setup-engine.sh installs. Prints exactly one line
on stdout once the server accepts requests:

    [pid PID] infergate-engine listening http://127.0.0.1:PORT

(PID is this process's: engines started at once may share a log file, and
each starter takes only its own process's line.)

and exits 0 on SIGTERM or SIGINT. It binds 127.0.0.1 only: the reference
engine exists for local tests and measurements, never to be reached from
another machine. Diagnostics (including llama.cpp's log) go to stderr.
"""

import argparse
import importlib.metadata
import os
import signal
import sys

READY_PREFIX = "infergate-engine listening "
HOST = "127.0.0.1"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="path to a GGUF file")
    ap.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    ap.add_argument("--ctx-size", type=int, default=8192, help="total KV-cache tokens, split evenly across slots (-c)")
    ap.add_argument("--parallel", type=int, default=1, help="server slots decoding at once (-np)")
    ap.add_argument("--batch", type=int, default=2048, help="logical batch size (-b)")
    ap.add_argument("--ubatch", type=int, default=512, help="physical micro-batch size (-ub)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads for generation (-t)")
    ap.add_argument("--threads-batch", type=int, default=None, help="CPU threads for prompt processing (-tb; default: --threads)")
    ap.add_argument("--alias", default=None, help="model id served in /v1/models (default: the file name)")
    ap.add_argument("--no-cache-prompt", action="store_true", help="do not reuse a slot's cached prompt prefix")
    ap.add_argument("--no-cont-batching", action="store_true", help="disable continuous batching")
    ap.add_argument("--kv-unified", action="store_true", help="one KV buffer shared by all slots (per-slot context is then not c/np)")
    ap.add_argument("--rope-freq-base", type=float, default=None, help="RoPE base frequency (default: the model's own)")
    ap.add_argument("--no-metrics", action="store_true", help="disable the Prometheus /metrics endpoint")
    ap.add_argument("--no-jinja", action="store_true", help="chat templates without Jinja: requests with OpenAI tools are refused")
    ap.add_argument("--speculative", choices=["ngram_simple"], help="speculative decoding without a draft model: n-gram lookup in the context")
    ap.add_argument("--embedding", action="store_true", help="serve /v1/embeddings (an embeddings server: no text generation)")
    ap.add_argument("--pooling", choices=["mean", "cls", "last"], default=None, help="with --embedding: how token vectors pool into one (default: the model's own)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the empty warm-up run at load")
    ap.add_argument("--verbosity", type=int, default=None, help="llama.cpp log verbosity (default: the library's)")
    args = ap.parse_args(argv)
    if not 0 <= args.port <= 65535:
        ap.error(f"--port {args.port} is not a TCP port")
    for name in ("ctx_size", "parallel", "batch", "ubatch", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.rope_freq_base is not None and not args.rope_freq_base > 0:
        ap.error("--rope-freq-base must be > 0")
    if args.pooling is not None and not args.embedding:
        ap.error("--pooling needs --embedding")
    if args.threads_batch is not None and args.threads_batch < 1:
        ap.error("--threads-batch must be >= 1")
    if args.ctx_size % args.parallel:
        ap.error(f"--ctx-size {args.ctx_size} is not a multiple of --parallel {args.parallel}")
    return args


def params(x, args):
    p = x.CommonParams()
    p.model.path = args.model
    p.hostnames = [HOST]
    p.port = args.port
    p.n_ctx = args.ctx_size
    p.n_parallel = args.parallel
    p.n_batch = args.batch
    p.n_ubatch = args.ubatch
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads_batch or args.threads
    p.cache_prompt = not args.no_cache_prompt
    p.cont_batching = not args.no_cont_batching
    p.kv_unified = args.kv_unified
    p.endpoint_metrics = not args.no_metrics
    p.use_jinja = not args.no_jinja
    if args.speculative == "ngram_simple":
        p.speculative.types = [x.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
    p.embedding = args.embedding
    if args.pooling is not None:
        p.pooling_type = getattr(x.llama_pooling_type, "LLAMA_POOLING_TYPE_" + args.pooling.upper())
    p.warmup = not args.no_warmup
    if args.rope_freq_base is not None:
        p.rope_freq_base = args.rope_freq_base
    if args.alias:
        p.model_alias = {args.alias}
    if args.verbosity is not None:
        p.verbosity = args.verbosity
    # The profile states the context exactly; llama.cpp's memory fitting
    # could otherwise change unset values behind its back.
    p.fit_params = False
    # No web UI: this server only answers API calls.
    p.ui = False
    return p


def main(argv):
    args = parse_args(argv)
    # Block the stop signals before the server starts its threads, which
    # inherit the mask; sigwait below then receives them in this thread, and
    # a signal that arrives while the model loads waits instead of killing us.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)

    import xllamacpp as x

    version = importlib.metadata.version("xllamacpp")
    print(f"infergate-engine: xllamacpp {version}, python {sys.version.split()[0]}, model {args.model}", file=sys.stderr, flush=True)

    server = x.Server(params(x, args))  # returns once the model is loaded and the port is bound
    address = server.listening_address
    if not address.startswith(f"http://{HOST}:"):
        print(f"infergate-engine: server listens on {address!r}, not {HOST}; refusing", file=sys.stderr, flush=True)
        return 1
    # One write, newline included, so the engine's own log lines (same file)
    # cannot land between the address and its newline.
    sys.stdout.write(f"[pid {os.getpid()}] {READY_PREFIX}{address}\n")
    sys.stdout.flush()

    received = signal.sigwait(stop_signals)
    print(f"infergate-engine: {signal.Signals(received).name} received, shutting down", file=sys.stderr, flush=True)
    del server  # stops the HTTP server and frees the model
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
