# `make test` and `make run` work on a bare machine with python3, make and the package registries.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install compile test lint typecheck imports java-check zookeeper kcat js-clients pytest run bench clean spark-archive

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

install: $(STAMP)

# Every daemon, CLI command and benchmark that `make test` and `make run` start is a fresh Python
# importing ~300 of kmeta's modules: compiled once here (Python reads these bytecode caches even
# where the environment sets PYTHONDONTWRITEBYTECODE, as these machines do), each start costs
# ~0.33 s of CPU instead of ~0.45 s compiling the same sources (make test: 807 -> 614 s of user
# CPU). An edit since only makes a start compile that module again.
compile: install
	$(BIN)/python -m compileall -q kmeta benchmarks

lint: install
	$(BIN)/ruff check kmeta tests benchmarks tools fuzz

typecheck: install
	$(BIN)/mypy kmeta

imports: install
	$(BIN)/lint-imports

java-check:
	@command -v java >/dev/null 2>&1 || { echo "make test: Java 17+ is required for the Spark pipeline tests (apt-get install openjdk-17-jre-headless)"; exit 1; }

# the controller quorum's tests run a real ZooKeeper: Debian's package, installed when missing
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
zookeeper:
	@test -f $(ZOOKEEPER_JAR) || { \
	  echo "make: installing ZooKeeper (Debian's zookeeper package)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends zookeeper >/dev/null; } || { \
	  echo "make test: ZooKeeper is required (apt-get install zookeeper, as root)"; exit 1; }

# the real-client tests (tests/e2e/test_real_clients*.py) run kcat (Debian's package) and kafkajs
# (npm, pinned by tests/e2e/js/package-lock.json): both installed when missing
kcat:
	@command -v kcat >/dev/null 2>&1 || { \
	  echo "make: installing kcat (Debian's kcat package)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends kcat >/dev/null; } || { \
	  echo "make test: kcat is required (apt-get install kcat, as root)"; exit 1; }

JS_CLIENTS := tests/e2e/js
js-clients: $(JS_CLIENTS)/node_modules/.package-lock.json

$(JS_CLIENTS)/node_modules/.package-lock.json: $(JS_CLIENTS)/package.json $(JS_CLIENTS)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "make test: node and npm are required (apt-get install nodejs npm)"; exit 1; }
	cd $(JS_CLIENTS) && npm ci --no-audit --no-fund --silent
	touch $@

# Three pytest-xdist workers, each running whole modules, the slow first (tests/scheduling.py:
# module-scoped clusters start once, the Spark tests are one unit with one Spark session). Most
# tests wait on daemons and sockets, so a third worker on the 2-core box pays: from a fresh clone
# on a quiet box, 2 workers took pytest 766 s (make test 13 min 28 s), 3 workers 632 s, 3
# workers scheduling whole modules slow-first 584 s (10 min 19 s, the box 72 % busy on
# average), and with kmeta compiled first (make compile) 492 s (8 min 54 s); 4 workers gained 4 %
# more, at 85 % busy. PYTEST_WORKERS=0: serial.
PYTEST_WORKERS ?= 3
pytest: compile java-check zookeeper kcat js-clients
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadscope --durations=25

test: lint typecheck imports pytest

# Optional: the Spark driver JVM's class-data archive (kmeta/pipeline/jvm_archive_build.py), written
# under .venv/share/kmeta; it cuts a session's start-up by a few seconds. Runs work the same
# without it or with a stale one (rebuild after upgrading pyspark or the JDK).
spark-archive: install java-check
	$(BIN)/python -m kmeta.pipeline.jvm_archive_build

run: compile
	$(BIN)/kmeta cluster up

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info $(JS_CLIENTS)/node_modules
