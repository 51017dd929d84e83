# The two commands the README opens with. Both set everything up on a fresh machine.
#   make run   - run the quick pool on this machine (built-in CPU workload) and print the report
#   make test  - the whole test suite (what CI runs)
#   make test-fast - lint and the tests that start no job, service or cluster (no apt; about two minutes on 2 cores)
#   make fuzz  - the fuzz tests of the dump and log readers, the parsers of the user's inputs and
#                the redaction of secrets, at FUZZ_EXAMPLES examples a property
#   make bench-logs - logsage's flood, 1 GB and grep -c targets in one run (benchmarks/bench_logs.py)
#   make bench-chaos - a small pool interrupted 50 times at random moments (benchmarks/chaos.py)

PYTHON ?= $(shell command -v python3.11 || command -v python3)
# Machines of this kind set PYTHONDONTWRITEBYTECODE: every process (each rank, Snakemake step and
# test worker) would compile the package's and the tests' modules again, a tenth to half a second
# each. make's commands cache their bytecode in __pycache__/ (git ignores it).
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.faultloop-installed
# The CPU build of torch; pip finds it in the machine's wheel folder when one is there, and it is
# installed before anything else so that nothing can pull a CUDA build.
TORCH := torch==2.13.0
WHEELS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
PIP := $(BIN)/python -m pip install --disable-pip-version-check $(WHEELS)
# The frameworks (pyproject.toml's `frameworks` extra) are installed under this constraint, so none
# of them can replace the CPU build; deepspeed's sdist builds against it (no build isolation).
TORCH_CONSTRAINT := $(VENV)/torch-constraint.txt

PY_SOURCES := src tests benchmarks workflow/scripts
RUN_CONFIG ?= pool_file=config/pools/quick.tsv session=quick
SNAKEMAKE_ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers for make test and test-fast: one per core of the 2-core machines the suite
# is sized for (tests/scheduling.py: a module runs on one worker, slow modules first).
TEST_WORKERS ?= 2
BENCH_ARGS ?=
# Examples per fuzz property in `make fuzz` (the suite runs 25-40, deterministically); 2000 take
# about half an hour on two cores. Inputs Hypothesis finds breaking a bound are kept in .hypothesis/.
# The unknown-shape properties (each example reads the whole corpus) run a hundredth of them.
FUZZ_EXAMPLES ?= 2000

.PHONY: run test test-fast fuzz bench-logs bench-chaos setup system-deps lint fmt clean-results docs-screenshot

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip setuptools
	$(PIP) $(TORCH)
	echo '$(TORCH)' > $(TORCH_CONSTRAINT)
	DS_BUILD_OPS=0 $(PIP) --constraint $(TORCH_CONSTRAINT) --no-build-isolation -e '.[test,frameworks]'
	$(BIN)/python -c "import torch, snakemake, faultloop; assert not torch.version.cuda, 'a CUDA build of torch got installed'"
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/snakemake --profile profiles/local --config $(RUN_CONFIG) $(SNAKEMAKE_ARGS)
	@$(BIN)/faultloop where $(RUN_CONFIG) | grep '^report:'

# docs/report.png: the quick pool's HTML report as chromium renders it (runs the pool if needed).
docs-screenshot: run
	$(BIN)/faultloop screenshot "$$($(BIN)/faultloop where $(RUN_CONFIG) | sed -n 's/^session: //p')/report.html" \
	  docs/report.png

# Debian packages the tests use: SLURM (a real local cluster), ripgrep (logsage's fastest
# prefilter; without it logsage falls back to grep) and chromium (renders the HTML report).
system-deps:
	bash scripts/slurm-cluster.sh install
	command -v rg >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends ripgrep) || echo "ripgrep not installed; logsage uses grep"
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends chromium)
	# the MPI launchers a cell may run under (faultloop.run.launchers): Open MPI's mpirun, MPICH's mpiexec
	command -v mpirun.openmpi >/dev/null && command -v mpiexec.hydra >/dev/null || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin mpich)

test: setup system-deps lint
	$(BIN)/python -m pytest -ra -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The edit-test loop: no Debian packages, no real jobs, SLURM or browser (the slow and slurm marks).
test-fast: setup lint
	$(BIN)/python -m pytest -ra -n $(TEST_WORKERS) -m "not slow and not slurm" $(PYTEST_ARGS)

fuzz: setup
	FAULTLOOP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -ra tests/analyze/test_fuzz_dumps.py \
		tests/analyze/test_fuzz_logs.py tests/analyze/test_logsage_shapes.py tests/plan/test_fuzz_inputs.py \
		tests/analyze/test_redact.py $(PYTEST_ARGS)

# One table: a log flood against an ordinary log of its size, the 1 GB log against the analyzer
# before issue 27, and logsage against grep -c at 0.5 and 1 GB (BENCH_ARGS: e.g. --repeats 5).
# Nice'd: the ratios are same-run.
bench-logs: setup
	nice -n 10 $(BIN)/python benchmarks/bench_logs.py $(BENCH_ARGS)

# 50 seeded interruptions of a small pool, each followed by a plain rerun; prints the counts, all 0
# when kept (BENCH_ARGS: e.g. --seed 2 --interruptions 100).
bench-chaos: setup
	nice -n 10 $(BIN)/python benchmarks/chaos.py --interruptions 50 $(BENCH_ARGS)

# The checks a change must pass: the workflow's (Snakemake's linter, snakefmt) and the Python's
# (ruff's lint and format, mypy on the package). `make fmt` fixes what can be fixed by itself.
lint: setup
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check .
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)
	$(BIN)/mypy

fmt: setup
	$(BIN)/snakefmt .
	$(BIN)/ruff check --fix $(PY_SOURCES)
	$(BIN)/ruff format $(PY_SOURCES)

clean-results:
	rm -rf results .snakemake
