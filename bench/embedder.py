"""Embedder benchmark: the torch path against the ONNX Runtime path, on customer questions the team wrote.

Each backend runs in a fresh process, one after the other (never both at once: the machine has two cores), and
reports: the time to import and load it (from the process's first line to a loaded model, the ONNX export already
cached), its throughput in sentences/s at batch sizes 1, 8, 32 and 64, the latency of one sentence embedded alone
(p50, p99), and the process's peak RSS. A round measures both backends in alternating order; ``--runs`` rounds
give the medians quoted, and each round's ONNX/torch ratios are compared within the round, because the machine is
shared and its speed drifts between rounds.

The sentences are the customer messages of ``bench/data/requests-*.jsonl`` and ``brightwave-phrasings.jsonl``
(about 700, 3 to 60 words, shuffled with a fixed seed): what the daemon embeds when a customer asks something.
Throughput is measured on the first ``--sentences`` of them at each batch size, latency on the next ``--repeats``.

Run: ``python -m bench.embedder`` (3 rounds; about 5 minutes on an idle machine, much longer on a busy one) or
``--quick`` (1 round, to check it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import report

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
BATCH_SIZES = (1, 8, 32, 64)
BACKENDS = ("torch", "onnx")

# Runs in the measured process: prints one JSON line of figures.
_PROBE = """
import json, resource, sys, time
started = time.perf_counter()
backend, sentences, repeats, threads = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
count = int(sys.argv[5])
if backend == "onnx":
    from vigil.knowledge.onnx_embedding import OnnxEmbedder as Model
else:
    from vigil.knowledge.embedding import SentenceTransformerEmbedder as Model
model = Model(threads=threads)
model.load()
load_s = time.perf_counter() - started
model.embed(sentences[:64])  # warm-up: first-call allocations, not the steady state
rates = {}
for size in (1, 8, 32, 64):
    begun = time.perf_counter()
    for start in range(0, count, size):
        model.embed(sentences[start : start + size])
    rates[size] = count / (time.perf_counter() - begun)
alone = []
for n in range(repeats):
    begun = time.perf_counter()
    model.embed([sentences[(count + n) % len(sentences)]])  # others than the throughput's
    alone.append((time.perf_counter() - begun) * 1000)
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"load_s": load_s, "rates": rates, "alone_ms": alone, "peak_rss_mib": peak_kib / 1024}))
"""


# The model alone on ``sessions`` cores: as many ONNX sessions (one thread each), each in a thread of its own, taking
# batches of 32 from one queue until the texts are done. Prints one JSON line.
_PARALLEL = """
import json, sys, threading, time
from vigil.knowledge.onnx_embedding import OnnxEmbedder
texts, sessions = json.loads(sys.argv[1]), int(sys.argv[2])
models = [OnnxEmbedder(threads=1) for _ in range(sessions)]
for model in models:
    model.load()
    model.embed(texts[:64])
batches = iter([texts[start : start + 32] for start in range(0, len(texts), 32)])
lock = threading.Lock()
def work(model):
    while True:
        with lock:
            batch = next(batches, None)
        if batch is None:
            return
        model.embed(batch)
workers = [threading.Thread(target=work, args=(model,)) for model in models]
begun = time.perf_counter()
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
print(json.dumps({"texts_per_s": len(texts) / (time.perf_counter() - begun)}))
"""


def model_rate(texts: list[str], sessions: int = 1) -> float:
    """What the model alone embeds (texts/s, batches of 32) with ``sessions`` ONNX sessions of one thread each,
    run in parallel threads of a fresh process: its own rate on one core (1) or on two (2)."""
    return float(_fresh_process(_PARALLEL, json.dumps(texts), str(sessions))["texts_per_s"])


def _fresh_process(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter with ``args``; the JSON object it prints last."""
    env = os.environ | {"TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the probe failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def sentences(limit: int | None = None) -> list[str]:
    """The customer messages that ask for something, then the team's phrasings of Brightwave questions."""
    texts: list[str] = []
    for path in sorted(DATA.glob("requests-*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        texts += [r["text"] for r in rows if r.get("needs")]
    phrasings = DATA / "brightwave-phrasings.jsonl"
    texts += [json.loads(line)["text"] for line in phrasings.read_text().splitlines() if line.strip()]
    return texts[:limit] if limit else texts


def probe(backend: str, texts: list[str], count: int, repeats: int, threads: int) -> dict[str, Any]:
    """One fresh process of ``backend``: its figures (throughput on the first ``count`` texts)."""
    figures = _fresh_process(_PROBE, backend, json.dumps(texts), str(repeats), str(threads), str(count))
    alone = figures.pop("alone_ms")
    figures["alone_p50_ms"] = report.percentile(alone, 0.5)
    figures["alone_p99_ms"] = report.percentile(alone, 0.99)
    figures["rates"] = {int(k): v for k, v in figures["rates"].items()}
    return figures


def summary(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per backend, the median of each figure over the rounds; and the median of the rounds' ONNX/torch ratios."""
    out: dict[str, Any] = {}
    for backend in BACKENDS:
        runs = [r[backend] for r in rounds]
        out[backend] = {
            "load_s": statistics.median(r["load_s"] for r in runs),
            "alone_p50_ms": statistics.median(r["alone_p50_ms"] for r in runs),
            "alone_p99_ms": statistics.median(r["alone_p99_ms"] for r in runs),
            "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in runs),
            "rates": {size: statistics.median(r["rates"][size] for r in runs) for size in BATCH_SIZES},
        }
    out["onnx_over_torch"] = {
        f"rate_{size}": statistics.median(r["onnx"]["rates"][size] / r["torch"]["rates"][size] for r in rounds)
        for size in BATCH_SIZES
    }
    out["onnx_over_torch"]["load_s"] = statistics.median(r["onnx"]["load_s"] / r["torch"]["load_s"] for r in rounds)
    return out


def table(result: dict[str, Any], runs: int) -> str:
    lines = [
        f"Medians of {runs} round(s); the ratio column is the median of each round's ONNX / torch.",
        "",
        "| | torch | ONNX Runtime | ONNX / torch |",
        "|---|---:|---:|---:|",
    ]
    torch, onnx, ratio = result["torch"], result["onnx"], result["onnx_over_torch"]
    for size in BATCH_SIZES:
        lines.append(
            f"| sentences/s, batches of {size} | {torch['rates'][size]:,.0f} | {onnx['rates'][size]:,.0f} "
            f"| {ratio[f'rate_{size}']:.2f}x |"
        )
    lines += [
        f"| one sentence alone, p50 (ms) | {torch['alone_p50_ms']:.2f} | {onnx['alone_p50_ms']:.2f} | |",
        f"| one sentence alone, p99 (ms) | {torch['alone_p99_ms']:.2f} | {onnx['alone_p99_ms']:.2f} | |",
        f"| import and load (s) | {torch['load_s']:.2f} | {onnx['load_s']:.2f} | {ratio['load_s']:.2f}x |",
        f"| peak RSS (MiB) | {torch['peak_rss_mib']:.0f} | {onnx['peak_rss_mib']:.0f} | |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embedder", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds, each measuring both backends (default 3)")
    parser.add_argument("--quick", action="store_true", help="1 round, 64 sentences, 30 single-sentence calls")
    parser.add_argument("--sentences", type=int, default=192, help="sentences per batch size (default 192)")
    parser.add_argument("--repeats", type=int, default=100, help="single-sentence calls for the latency (default 100)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per backend (vigil's default: 1)")
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    count = 64 if args.quick else args.sentences
    repeats = 30 if args.quick else args.repeats
    texts = sentences()
    random.Random(11).shuffle(texts)  # the companies and styles mixed, as they arrive
    rounds: list[dict[str, dict[str, Any]]] = []
    for number in range(runs):
        order = BACKENDS if number % 2 == 0 else BACKENDS[::-1]
        measured = {backend: probe(backend, texts, count, repeats, args.threads) for backend in order}
        rounds.append(measured)
        print(
            f"round {number + 1}: "
            + ", ".join(
                f"{b} {measured[b]['rates'][32]:,.0f}/s at 32, load {measured[b]['load_s']:.1f} s" for b in order
            ),
            file=sys.stderr,
            flush=True,
        )
    result = summary(rounds)
    plan = {"runs": runs, "sentences": count, "repeats": repeats, "threads": args.threads}
    path = report.save("embedder", argv, plan, {"load_average": os.getloadavg(), "rounds": rounds, "summary": result})
    print(table(result, runs))
    print(f"\n{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
