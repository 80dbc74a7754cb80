# modelc — the two commands a person needs:
#   make run    builds modelc and shows what it is for: fetch, compile, train, classify, draw
#   make test   runs every check and test
# Both install the Debian packages they need when missing.

# swift with a TMPDIR of its own, removed afterwards: the toolchain leaves empty
# TemporaryDirectory.* directories in TMPDIR on every call (Scripts/swift.sh).
SWIFT       ?= $(CURDIR)/Scripts/swift.sh
VENV        ?= .venv
PYTHON      ?= python3
# Clients of `modelc serve` we did not write, each in a venv of its own from a pinned file:
# tritonclient (small) and kserve (its model server comes along: ~450 MB).
SERVE_VENV  ?= .venv-serve
KSERVE_VENV ?= .venv-kserve
SERVE_BENCH_VENV ?= .venv-serve-bench
MODELC_BIN  ?= .build/release/modelc
SWIFT_FLAGS ?= -Xswiftc -warnings-as-errors
# The concurrent code, run a third time under ThreadSanitizer: the tensor
# engine (two predictions at once on each ML program fixture, products split
# over threads in the zoo), the model
# caches (bundles, and runnable models predicting under pressure), image
# requests shared between threads, downloads (the hashing thread), the fetch
# cache's locks, parallel builds (the CLI tests run the instrumented modelc),
# the server's scheduler, endpoints (REST and gRPC) and generation streams, the tensor engine's concurrent parity,
# and decoders planning their next step in the background.
TSAN_TESTS  ?= --filter 'TensorEngineParityTests|ZooParityTests/threaded|OrderedParallelWorkTests|ModelCacheTests|ModelCachePressureTests|RunnableModelCacheTests|ImageRequestTests|DownloaderFaultTests|FetcherTests|FetchCacheMaintenanceTests|BuildCommandTests|InferenceSchedulerTests|InferenceServiceTests|GRPCServiceTests|GenerateServiceTests|ModelStatisticsTests|TraceExporterTests|TextGenerationTests|SequenceStoreTests'

.PHONY: all deps build run test check-generated grpc-messages spec spec-check fixtures venv bench bench-llm fuzz clean \
        zoo zoo-full python-lib python-venv python-test wheel conformance ray-test test-serve test-kserve load \
        dist install uninstall deb test-install test-deb-fresh

all: build

deps:
	@Scripts/install-deps.sh

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

# The whole path, offline: a loopback HTTP server serves a base network,
# modelc fetches (pinned SHA-256) and compiles it, trains a classifier of ball
# colours on generated pictures (with --report), classifies the sample photos
# and draws the model (Scripts/run-demo.sh; python3 only for the server and
# the pictures, standard library).
run: build
	@Scripts/install-deps.sh python3
	@Scripts/run-demo.sh

# The whole suite runs on the optimized build (bugs such as a pointer that
# outlives what it points to often show only when optimized; the tests' own
# code is not optimized, see Package.swift), then `modelc serve` end to end
# with real protocol clients, the concurrent code under ThreadSanitizer on a
# debug build (so the debug configuration compiles without warnings too), and
# the Python package's tests over the optimized library. `swift test` runs the
# whole suite on a debug build.
# The engine's parity tests run twice more with the CPU-dependent paths capped: oneDNN and modelc's own
# kernels at AVX2 (ONEDNN_MAX_CPU_ISA, MODELC_MAX_CPU_ISA), then modelc's at plain C, so that on an AVX-512
# machine the AVX2 paths (Winograd, channel blocks, packed-weight loops) run too, and every family on any CPU;
# the packed-weight products once more at AVX-512 without VNNI (their vpmaddubsw loops, on a VNNI machine).
CPU_CAPPED_TESTS = --filter 'PackedWeightsTests|TextGenerationTests|StatefulDecoderTests|ZooParityTests|TensorEngineParityTests|VectorMathTests|WinogradConvolutionTests|ChannelBlockingTests|ProductDepthSplitTests|ProductColumnSplitTests|DNNLPrimitiveTests|AttentionFusionTests|ElementStorageTests'
RELEASE_TESTING = -c release -Xswiftc -enable-testing
test: deps check-generated
	@Scripts/install-deps.sh nginx openssl python3 chromium
	$(SWIFT) build $(RELEASE_TESTING) --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test -c release --skip-build
	ONEDNN_MAX_CPU_ISA=AVX2 MODELC_MAX_CPU_ISA=avx2 $(SWIFT) test -c release --skip-build $(CPU_CAPPED_TESTS)
	MODELC_MAX_CPU_ISA=generic $(SWIFT) test -c release --skip-build $(CPU_CAPPED_TESTS)
	MODELC_MAX_CPU_ISA=avx512 $(SWIFT) test -c release --skip-build --filter 'PackedWeightsTests|TextGenerationTests'
	$(MAKE) test-serve test-kserve MODELC_BIN=.build/release/modelc
	$(SWIFT) build --build-tests $(SWIFT_FLAGS) --sanitize=thread --scratch-path .build/tsan
	$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan $(TSAN_TESTS)
	$(MAKE) python-test LIBRARY_BUILD="$(RELEASE_TESTING)"
	$(MAKE) test-install DIST_BUILD="$(RELEASE_TESTING) $(SWIFT_FLAGS)"

# `modelc serve` end to end: the real server on a free loopback port, driven by tritonclient[http]
# and by kserve's REST client (health, metadata, JSON and binary tensors, classification,
# repository, faults, SIGTERM under load, a short load run). pytest's exit 5 (nothing collected)
# is a failure here: it means the suite was not found, not that it passed.
$(SERVE_VENV)/.installed: Tests/ServingE2E/requirements.txt
	@Scripts/install-deps.sh python3-venv
	$(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/pip install --quiet -r Tests/ServingE2E/requirements.txt
	touch $@
$(KSERVE_VENV)/.installed: Tests/ServingE2E/requirements-kserve.txt
	@Scripts/install-deps.sh python3-venv
	$(PYTHON) -m venv $(KSERVE_VENV)
	$(KSERVE_VENV)/bin/pip install --quiet -r Tests/ServingE2E/requirements-kserve.txt
	touch $@

test-serve: $(SERVE_VENV)/.installed
	@Scripts/install-deps.sh openssl
	@test -x $(MODELC_BIN) || { $(SWIFT) build -c release --product modelc $(SWIFT_FLAGS) && \
	    $(SWIFT) build -c release --product ModelcGRPC $(SWIFT_FLAGS); }
	MODELC_BIN=$(abspath $(MODELC_BIN)) $(SERVE_VENV)/bin/python -m pytest -q -p no:cacheprovider Tests/ServingE2E \
	    --ignore=Tests/ServingE2E/test_kserve.py; status=$$?; \
	    if [ $$status -eq 5 ]; then echo "test-serve: pytest collected no tests" >&2; fi; exit $$status

test-kserve: $(KSERVE_VENV)/.installed
	@test -x $(MODELC_BIN) || { $(SWIFT) build -c release --product modelc $(SWIFT_FLAGS) && \
	    $(SWIFT) build -c release --product ModelcGRPC $(SWIFT_FLAGS); }
	MODELC_BIN=$(abspath $(MODELC_BIN)) $(KSERVE_VENV)/bin/python -m pytest -q -p no:cacheprovider Tests/ServingE2E/test_kserve.py; \
	    status=$$?; if [ $$status -eq 5 ]; then echo "test-kserve: pytest collected no tests" >&2; fi; exit $$status

# The long load runs of `modelc serve` (64 clients x 30 s; LOAD_SECONDS, LOAD_CLIENTS change them).
load: deps venv $(SERVE_VENV)/.installed
	@Scripts/install-deps.sh wrk curl nghttp2-client
	$(SWIFT) build -c release --product modelc --static-swift-stdlib
	Scripts/serve-load.sh .build/release/modelc $(VENV)/bin/python $(SERVE_VENV)/bin/python

check-generated:
	@$(PYTHON) Scripts/check-generated.py Sources/CoreMLSchema Sources/InferenceMessages

# Regenerate the C code of the gRPC messages `modelc serve` answers from Protos/inference.proto.
grpc-messages:
	@Scripts/install-deps.sh protobuf-c-compiler
	$(PYTHON) Scripts/generate_grpc_messages.py Sources/InferenceMessages

# Python tools (coremltools, scikit-learn) for regenerating the schema and fixtures.
venv: $(VENV)/.installed
$(VENV)/.installed: Scripts/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r Scripts/requirements.txt
	touch $@

# Regenerate the C code of the Core ML schema from coremltools' descriptors.
spec: venv
	@Scripts/install-deps.sh protobuf-c-compiler
	$(VENV)/bin/python Scripts/generate_schema.py Sources/CoreMLSchema

# Regenerate into a scratch directory and compare with what is committed.
spec-check: venv
	@Scripts/install-deps.sh protobuf-c-compiler
	rm -rf .build/spec-check
	$(VENV)/bin/python Scripts/generate_schema.py .build/spec-check
	diff -r Sources/CoreMLSchema .build/spec-check

# Regenerate the fixture models and Fixtures/index.json, and the graph test programs (Fixtures/Graph).
fixtures: venv
	$(VENV)/bin/python Fixtures/generate.py
	$(VENV)/bin/python Fixtures/generate_graph.py
	$(VENV)/bin/python Fixtures/tensor_ops.py
	$(VENV)/bin/python Fixtures/tensor_op_cases.py
	$(VENV)/bin/python Fixtures/mil_operations.py

# The model zoo: torchvision and transformers architectures with seeded
# weights, converted as fp32 and fp16 ML programs, neural networks and
# compressed programs, checked against PyTorch float64 (Scripts/zoo.py).
# PyTorch is large: its own venv, not part of `make test`, which reads the
# committed small models in Fixtures/Parity/Zoo. `make zoo-full` builds the
# torchvision models at their published sizes into .build/zoo and runs them
# on modelc's tensor engine (Scripts/zoo_check.py).
ZOO_VENV ?= .venv-zoo
# llama.cpp (llama-cpp-python compiled from source) for the LLM bench only.
LLAMA_VENV ?= .venv-llama
$(ZOO_VENV)/.installed: Scripts/zoo-requirements.txt Scripts/requirements.txt
	$(PYTHON) -m venv $(ZOO_VENV)
	$(ZOO_VENV)/bin/pip install --quiet -r Scripts/zoo-requirements.txt
	touch $@

zoo: deps $(ZOO_VENV)/.installed
	$(ZOO_VENV)/bin/python Scripts/zoo.py
	$(ZOO_VENV)/bin/python Fixtures/stateful_decoder.py
	$(ZOO_VENV)/bin/python Fixtures/llama_decoder.py
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --filter 'ZooParityTests|StatefulDecoderTests'

zoo-full: deps $(ZOO_VENV)/.installed
	@test -x $(MODELC_BIN) || $(SWIFT) build -c release --product modelc $(SWIFT_FLAGS)
	$(ZOO_VENV)/bin/python Scripts/zoo.py --full --check $(MODELC_BIN)

# Benchmarks: ratios against baselines measured in the same run (not tests).
# modelc is measured as shipped: optimized, with the Swift runtime linked in
# statically (a single binary; about 6 MB less memory than loading it shared).
bench: deps venv $(SERVE_BENCH_VENV)/.installed $(ZOO_VENV)/.installed $(LLAMA_VENV)/.installed
	@Scripts/install-deps.sh time curl nginx graphviz
	$(SWIFT) build -c release --product modelc --static-swift-stdlib
	$(SWIFT) build -c release --product ModelcBenchmarks
	Scripts/bench.sh
	Scripts/serve-bench.sh
	ZOO_VENV=$(ZOO_VENV) Scripts/bench-transformers.sh
	ZOO_VENV=$(ZOO_VENV) Scripts/bench-cnn.sh
	VENV=$(VENV) Scripts/bench-overhead.sh
	$(BENCH_LLM)

# LLM section (also `make bench-llm` alone): `modelc generate` on Llama-shaped stateful decoders with
# seeded weights, 200 M and 0.85 B parameters (fp16, int4 per block of 32) and a 7B-shaped int4 program
# written with coremltools' MIL builder, against onnxruntime and llama.cpp on the same weights and the
# memory bandwidth measured in the run (Scripts/bench_llm.py). The models are built once into
# .build/bench-llm (about 20 GB of disk, a quarter of an hour; reruns reuse them); llama.cpp is compiled
# once into .venv-llama. BENCH_LLM_ARGS passes options (--models 200m-int4,7b-int4 --rounds 1 ...).
$(LLAMA_VENV)/.installed: Scripts/requirements-llama.txt
	$(PYTHON) -m venv $(LLAMA_VENV)
	nice -n 19 $(LLAMA_VENV)/bin/pip install --quiet -r Scripts/requirements-llama.txt
	touch $@

BENCH_LLM = $(ZOO_VENV)/bin/python Scripts/bench_llm.py --modelc $(MODELC_BIN) \
            --llama-python $(LLAMA_VENV)/bin/python $(BENCH_LLM_ARGS)
bench-llm: deps $(ZOO_VENV)/.installed $(LLAMA_VENV)/.installed
	@Scripts/install-deps.sh time
	$(SWIFT) build -c release --product modelc --static-swift-stdlib
	@Scripts/cpu-summary.sh
	$(BENCH_LLM)

# MLServer and its friends for the serving bench only, never for make test.
$(SERVE_BENCH_VENV)/.installed: Scripts/requirements-serve-bench.txt
	$(PYTHON) -m venv $(SERVE_BENCH_VENV)
	$(SERVE_BENCH_VENV)/bin/pip install --quiet -r Scripts/requirements-serve-bench.txt
	touch $@

# The Python package (python/) over the C interface: the shared library and
# the CLI (which the tests compare with), a venv of pinned PyPI packages, pytest.
# pytest's exit code 5 (no tests collected) counts as a failure here: the
# suite is never empty, so 5 means it was not found.
PYVENV      ?= .venv-python
PYTEST_ARGS ?=
# The configuration the library and the CLI are built in (debug unless given).
LIBRARY_BUILD ?=
python-lib: deps
	$(SWIFT) build $(LIBRARY_BUILD) $(SWIFT_FLAGS) --product ModelcC
	$(SWIFT) build $(LIBRARY_BUILD) $(SWIFT_FLAGS) --product modelc

python-venv: $(PYVENV)/.installed
$(PYVENV)/.installed: python/requirements-test.txt
	$(PYTHON) -m venv $(PYVENV)
	$(PYVENV)/bin/pip install --quiet -r python/requirements-test.txt
	touch $@

python-test: python-lib python-venv
	MODELC_LIBRARY=$$($(SWIFT) build $(LIBRARY_BUILD) --show-bin-path)/libModelcC.so $(PYVENV)/bin/python -m pytest -q -p no:cacheprovider python/tests $(PYTEST_ARGS); \
	status=$$?; if [ $$status -eq 5 ]; then echo "python/tests: no tests collected" >&2; fi; exit $$status

# A wheel holding libmodelc.so (the optimized build `make install` ships) and, in modelc/_runtime/,
# the Swift runtime it loads; the Debian libraries it links or opens come from the machine
# (the .deb's Depends: docs/install.md).
WHEEL_DIR ?= .build/wheel
wheel: dist python-venv
	@Scripts/install-deps.sh patchelf help2man
	rm -rf $(DIST_SCRATCH)/wheel-stage
	Scripts/install.sh "$$($(SWIFT) build $(DIST_BUILD) --show-bin-path)" $(DIST_SCRATCH)/wheel-stage /usr >/dev/null
	Scripts/wheel-libraries.sh $(DIST_SCRATCH)/wheel-stage/usr python/modelc
	$(PYVENV)/bin/pip wheel --quiet --no-deps -w $(WHEEL_DIR) ./python; \
	status=$$?; rm -rf python/build python/modelc.egg-info python/modelc/libmodelc.so python/modelc/_runtime \
	    $(DIST_SCRATCH)/wheel-stage; exit $$status
	@ls $(WHEEL_DIR)

# Installing (docs/install.md). The optimized build that install, deb and wheel ship has a scratch
# path of its own, so that it and `make test`'s build (-enable-testing) do not rebuild each other.
# `make install PREFIX=/usr/local [DESTDIR=…]`; `make deb` writes $(DEB_DIR)/modelc_VERSION_ARCH.deb.
PREFIX       ?= /usr/local
DESTDIR      ?=
DIST_SCRATCH ?= .build/dist
DIST_BUILD   ?= -c release $(SWIFT_FLAGS) --scratch-path $(DIST_SCRATCH)
DEB_DIR      ?= .build/deb
DEB_COMPRESSION ?= -Zxz
dist: deps
	$(SWIFT) build $(DIST_BUILD) --product modelc
	$(SWIFT) build $(DIST_BUILD) --product ModelcC
	$(SWIFT) build $(DIST_BUILD) --product ModelcFaces
	$(SWIFT) build $(DIST_BUILD) --product ModelcGRPC

install: dist
	@Scripts/install-deps.sh patchelf help2man
	Scripts/install.sh "$$($(SWIFT) build $(DIST_BUILD) --show-bin-path)" "$(DESTDIR)" "$(PREFIX)"

uninstall:
	Scripts/install.sh --uninstall "$(DESTDIR)" "$(PREFIX)"

deb:
	@command -v dpkg-deb >/dev/null 2>&1 || { echo "make deb: dpkg-deb not found: a .deb is built on Debian or Ubuntu (package dpkg)" >&2; exit 1; }
	@$(MAKE) --no-print-directory dist
	@Scripts/install-deps.sh patchelf help2man dpkg-dev
	DEB_COMPRESSION="$(DEB_COMPRESSION)" Scripts/make-deb.sh "$$($(SWIFT) build $(DIST_BUILD) --show-bin-path)" $(DEB_DIR)

# Installs into a scratch root, builds the .deb and the wheel, and runs each from where it was
# unpacked with nothing of the build tree or the toolchain on the library path; builds
# deploy/Dockerfile where a Docker engine answers (Tests/Install/test-install.sh). `make test`
# runs it over its own optimized build (-enable-testing) instead of building $(DIST_SCRATCH).
test-install: python-venv
	DIST_BIN=$$($(SWIFT) build $(DIST_BUILD) --show-bin-path) PYVENV=$(PYVENV) Tests/Install/test-install.sh

# The package on a fresh Debian 12: debootstrap, apt-get install of the .deb resolving its Depends
# from Debian's mirror, modelc run there (Tests/Install/test-deb-fresh.sh). Root and the mirror;
# about 5 minutes; not part of make test.
test-deb-fresh: deb
	Tests/Install/test-deb-fresh.sh $$(ls -t $(DEB_DIR)/modelc_*.deb | head -1)

# modelc.ray on a real local Ray cluster (python/tests/test_ray.py: `ray start`
# head and worker on 127.0.0.1, two actors). Apart from make test: Ray and its
# dependencies are about 600 MB of packages.
RAYVENV     ?= .venv-ray
$(RAYVENV)/.installed: python/requirements-ray.txt
	$(PYTHON) -m venv $(RAYVENV)
	$(RAYVENV)/bin/pip install --quiet -r python/requirements-ray.txt
	touch $@

ray-test: python-lib $(RAYVENV)/.installed
	MODELC_LIBRARY=$$($(SWIFT) build --show-bin-path)/libModelcC.so $(RAYVENV)/bin/python -m pytest -q -p no:cacheprovider python/tests/test_ray.py

# coremltools 9.0's MIL op tests (shipped in the wheel) with modelc as the
# backend: SAMPLE (fraction of test cases, seeded by SEED), OPSETS (iOS14,…),
# FILES (test_*.py names), PER_FILE=1 (each file in its own pytest process, resumable:
# .build/conformance/files/). Writes .build/conformance/summary.md. SUITE=ops|converters|all
# (default all: coremltools' converter tests too, .build/conformance/converters/summary.md). Not a test:
# the counts are recorded in docs/conformance.md. A third of the cases build
# their programs from PyTorch, so they run in the zoo venv (torch 2.7.0, the
# one copy of torch) with the Python package's test requirements (pytest) added.
SAMPLE ?= 0.1
$(ZOO_VENV)/.conformance: $(ZOO_VENV)/.installed python/requirements-test.txt Scripts/conformance-requirements.txt
	$(ZOO_VENV)/bin/pip install --quiet -r python/requirements-test.txt -r Scripts/conformance-requirements.txt
	touch $@

conformance: python-lib $(ZOO_VENV)/.conformance
	MODELC_LIBRARY=$$($(SWIFT) build $(LIBRARY_BUILD) --show-bin-path)/libModelcC.so SAMPLE=$(SAMPLE) \
	    $(ZOO_VENV)/bin/python Scripts/conformance.py

# libFuzzer with AddressSanitizer over reading and validating models, bounded
# by FUZZ_SECONDS; its own scratch path keeps the instrumented build apart.
fuzz: deps
	$(SWIFT) build -c release --product ModelFuzzer --scratch-path .build/fuzz-build \
	    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DMODELC_FUZZING -Xswiftc -use-ld=lld
	Scripts/fuzz.sh .build/fuzz-build/release/ModelFuzzer

clean:
	$(SWIFT) package clean
	rm -rf .build/spec-check
