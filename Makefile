# `make run`: the daemon on embedded defaults (local broker, SQLite, demo traffic).
# `make test`: lint, types and the whole suite against real services.
# Both install what they need into .venv first; that step is skipped when pyproject.toml has not changed.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HASH := $(shell sha1sum pyproject.toml | cut -c1-12)
RUN_STAMP := $(VENV)/.run-$(HASH)
DEV_STAMP := $(VENV)/.dev-$(HASH)
PROMTOOL := .tools/bin/promtool

.PHONY: run test test-pythons lint format typecheck bench bench-quick eval eval-irc screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[embedded]'
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(RUN_STAMP)

# promtool (validates /metrics) from Debian's prometheus package, unpacked locally: no service is installed.
$(PROMTOOL):
	mkdir -p .tools/deb
	cd .tools/deb && (apt-get download prometheus 2>/dev/null || (apt-get update -qq && apt-get download prometheus))
	dpkg-deb -x .tools/deb/prometheus_*.deb .tools/deb/root
	mkdir -p .tools/bin && cp .tools/deb/root/usr/bin/promtool $(PROMTOOL)

run: $(RUN_STAMP)
	$(BIN)/vigil demo

lint: $(DEV_STAMP)
	$(BIN)/ruff format --check vigil tests bench docs eval
	$(BIN)/ruff check vigil tests bench docs eval
	$(BIN)/lint-imports

typecheck: $(DEV_STAMP)
	$(BIN)/mypy vigil eval

format: $(DEV_STAMP)
	$(BIN)/ruff format vigil tests bench docs eval
	$(BIN)/ruff check --fix vigil tests bench docs eval

# The suite in worker processes (pytest-xdist), one more than the cores, up to four: it waits on brokers, databases
# and subprocesses more than it computes (19 min of CPU in 16 min on this 2-core machine with three workers, against
# 20.4 min with two); idle workers take queued tests from busy ones (worksteal), so the long end-to-end tests do not
# leave one worker alone at the end. `.venv/bin/pytest tests/...` runs a part in one process, as usual.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n + 1 < 4 ? n + 1 : 4 )))
test: $(DEV_STAMP) $(PROMTOOL) lint typecheck
	PATH="$(CURDIR)/.tools/bin:$$PATH" $(BIN)/pytest --numprocesses=$(TEST_WORKERS) --dist worksteal

# The wire parser's tests (property tests included) on every other supported Python found here: json.loads and
# the recursion limit differ between versions. A venv each, with only what vigil.wire.events needs.
OTHER_PYTHONS ?= $(wildcard /root/.pyenv/versions/3.12*/bin/python /root/.pyenv/versions/3.13*/bin/python)
test-pythons:
	@[ -n "$(OTHER_PYTHONS)" ] || echo "test-pythons: no Python 3.12 or 3.13 here; the parser ran on this venv's only"
	@for py in $(OTHER_PYTHONS); do \
	  v=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])'); env=.tools/py$$v; \
	  [ -x $$env/bin/pytest ] || { $$py -m venv $$env && $$env/bin/pip install -q pydantic==2.14.4 hypothesis==6.170.17 \
	    pytest==9.2.0 pytest-asyncio==1.5.0 pytest-timeout==2.4.0; } || exit 1; \
	  echo "Python $$v: tests/wire/test_events.py"; \
	  PYTHONPATH=$(CURDIR) $$env/bin/python -m pytest tests/wire/test_events.py -q -p no:cacheprovider --noconftest || exit 1; \
	done

# Speed and memory (docs/benchmarks.md): issue 24's targets with every capability on (the quick form's loads, the
# full demo mix and PostgreSQL, three repeats), ingest on both databases, then the answer path's capacity and latency.
bench: $(DEV_STAMP)
	$(BIN)/python -m bench.quick --full
	$(BIN)/python -m bench.ingest
	$(BIN)/python -m bench.answers

# A few minutes, re-run by every issue before it closes (docs/benchmarks.md, "Quick"): ingest of analyst messages
# and 2,000 questions in the default configuration, as ratios to the same run's limits, with a PASS/FAIL line each.
bench-quick: $(DEV_STAMP)
	$(BIN)/python -m bench.quick

# Quality on data written by others (../shared/data): question detection, retrieval, confidence calibration.
eval: $(DEV_STAMP)
	$(BIN)/python -m bench.eval_questions --split test
	$(BIN)/python -m bench.eval_retrieval --cv 5 --seeds 0 1 2
	$(BIN)/python -m bench.eval_redaction --split test
	$(BIN)/python -m bench.calibrate
	$(BIN)/python -m bench.eval_phrasings --split test
	$(BIN)/python -m eval.irc_agreement

# Issue 12 (docs/evaluation.md): the #ubuntu threads replayed in date order as cases closed by a human, with the
# miner as the environment sets it (VIGIL_MINER__ENABLED=false for the comparison), its entries served as mined (no
# lead reviews them here), scored on the test period (threads from 2010-01-01). Its own SQLite database and data dir
# in IRC_OUT, emptied first.
IRC_OUT ?= /tmp/vigil-eval-irc
eval-irc: $(DEV_STAMP)
	mkdir -p $(IRC_OUT)/data
	$(BIN)/python eval/ubuntu_irc.py --cases --out $(IRC_OUT)/events.jsonl
	VIGIL_DATA_DIR=$(IRC_OUT)/data VIGIL_DATABASE__URL=sqlite+aiosqlite:///$(IRC_OUT)/data/vigil.db \
	  VIGIL_KNOWLEDGE__PATHS='["knowledge/articles","knowledge/faqs"]' VIGIL_MINER__REQUIRE_REVIEW=false \
	  $(BIN)/vigil eval replay $(IRC_OUT)/events.jsonl --out $(IRC_OUT)/suggestions.jsonl --fresh
	$(BIN)/python -m eval.irc_score $(IRC_OUT)/events.jsonl $(IRC_OUT)/suggestions.jsonl --since 2010-01-01 \
	  --json $(IRC_OUT)/score.json

# The panel's screenshots in docs/ (vigil demo in Debian's Chromium; needs `apt-get install chromium`).
screenshots: $(DEV_STAMP)
	PYTHONPATH=. $(BIN)/python docs/screenshots.py

clean:
	rm -rf $(VENV) .tools .vigil .pytest_cache .mypy_cache .ruff_cache
