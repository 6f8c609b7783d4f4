# Set-up is idempotent: a stamp file records that .venv matches pyproject.toml.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run cluster test lint typecheck unit quick bench soak clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@if [ "$$(id -u)" = "0" ] && ! command -v kcat >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; fi
	@# ZooKeeper (Debian's 3.8 server) for cluster mode and its tests (tests/cluster).
	@if [ "$$(id -u)" = "0" ] && [ ! -f /usr/share/java/zookeeper.jar ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null; fi
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,spark]'
	@# Azurite (Azure Blob emulator) for the object-store backend contract tests.
	@test -x .tools/node_modules/.bin/azurite-blob || npm install --silent --no-audit --no-fund --prefix .tools azurite
	@# s3rver: a fast S3-compatible server for the cold-read benchmark (tests use moto).
	@test -x .tools/node_modules/.bin/s3rver || npm install --silent --no-audit --no-fund --prefix .tools s3rver
	@# kafkajs: a transactional producer in the client matrix of the transaction tests.
	@test -f .tools/node_modules/kafkajs/package.json || npm install --silent --no-audit --no-fund --prefix .tools kafkajs
	@touch $(STAMP)

run: install
	$(VENV)/bin/tierlog serve

# A local ZooKeeper and three brokers on 127.0.0.1:9092-9094, in the foreground (Ctrl-C).
cluster: install
	$(PY) tools/local_cluster.py

lint: install
	$(VENV)/bin/ruff check src tests bench tools
	$(VENV)/bin/ruff format --check src tests bench tools

typecheck: install
	$(VENV)/bin/mypy

# Most tests wait on brokers, ZooKeeper and clients rather than compute, so two pytest-xdist
# workers halve the wall time on two cores. A file stays on one worker (its module fixtures
# start once); PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
PYTEST := $(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) --dist loadfile

unit: install
	$(PYTEST)

# The inner loop: everything but Spark and the end-to-end fault suites (see tests/conftest.py).
quick: install
	$(PYTEST) -m "not spark and not slow"

test: lint typecheck unit

bench: install
	$(PY) bench/run_all.py

soak: install
	TIERLOG_SOAK=1 $(VENV)/bin/pytest -q tests/reliability \
		"tests/cluster/test_replication.py::test_kill_loop_keeps_every_acknowledged_record_once_in_order" \
		tests/clients/test_txn_exactly_once_kill9.py tests/cluster/test_txn_exactly_once_cluster.py

clean:
	rm -rf $(VENV) build *.egg-info
