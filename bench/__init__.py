"""vigil's benchmarks: ``python -m bench.ingest`` measures ingest throughput, latency and memory."""
