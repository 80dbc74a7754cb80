# modelc — the two commands a person needs:
#   make run    builds modelc and compiles a bundled fixture model into a bundle
#   make test   runs every check and test
# Both install the Debian packages they need when missing.

SWIFT       ?= swift
VENV        ?= .venv
PYTHON      ?= python3
FIXTURE     ?= Fixtures/Models/ImageClassifier.mlmodel
SWIFT_FLAGS ?= -Xswiftc -warnings-as-errors
# The concurrent code, run a third time under ThreadSanitizer: the tensor
# engine (two predictions at once on each ML program fixture, products split
# over threads in the zoo), the model
# caches (bundles, and runnable models predicting under pressure), image
# requests shared between threads, downloads (the hashing thread), the fetch
# cache's locks, and parallel builds (the CLI tests run the instrumented modelc).
TSAN_TESTS  ?= --filter 'TensorEngineParityTests|ZooParityTests|OrderedParallelWorkTests|ModelCacheTests|ModelCachePressureTests|RunnableModelCacheTests|ImageRequestTests|DownloaderFaultTests|FetcherTests|FetchCacheMaintenanceTests|BuildCommandTests'

.PHONY: all deps build run test check-generated spec spec-check fixtures venv zoo bench fuzz clean

all: build

deps:
	@Scripts/install-deps.sh

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

RUN_OUTPUT ?= .build/run/$(basename $(notdir $(FIXTURE))).mlmodelc

run: build
	@mkdir -p $(dir $(RUN_OUTPUT))
	$(SWIFT) run $(SWIFT_FLAGS) modelc inspect $(FIXTURE)
	$(SWIFT) run $(SWIFT_FLAGS) modelc compile $(FIXTURE) $(RUN_OUTPUT)
	@ls -l $(RUN_OUTPUT) $(RUN_OUTPUT)/weights

# The suite runs twice: as built for debugging, and optimized (bugs such as a
# pointer that outlives what it points to often show only when optimized);
# then the cache's concurrency tests run under ThreadSanitizer.
test: deps check-generated
	@Scripts/install-deps.sh nginx openssl python3
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build
	$(SWIFT) build -c release --build-tests $(SWIFT_FLAGS) -Xswiftc -enable-testing
	$(SWIFT) test -c release --skip-build
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan $(TSAN_TESTS)

check-generated:
	@$(PYTHON) Scripts/check-generated.py Sources/CoreMLSchema

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

# Regenerate the fixture models and Fixtures/index.json.
fixtures: venv
	$(VENV)/bin/python Fixtures/generate.py
	$(VENV)/bin/python Fixtures/tensor_ops.py

# The model zoo: transformers architectures from tiny configs with seeded
# weights, converted as fp32 and fp16 ML programs, checked against PyTorch
# float64 (Scripts/zoo.py). PyTorch is large: its own venv, not part of `make test`,
# which reads the committed results in Fixtures/Parity/Zoo.
ZOO_VENV ?= .venv-zoo
$(ZOO_VENV)/.installed: Scripts/zoo-requirements.txt Scripts/requirements.txt
	$(PYTHON) -m venv $(ZOO_VENV)
	$(ZOO_VENV)/bin/pip install --quiet -r Scripts/zoo-requirements.txt
	touch $@

zoo: deps $(ZOO_VENV)/.installed
	$(ZOO_VENV)/bin/python Scripts/zoo.py
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --filter 'ZooParityTests'

# Benchmarks: ratios against baselines measured in the same run (not tests).
# modelc is measured as shipped: optimized, with the Swift runtime linked in
# statically (a single binary; about 6 MB less memory than loading it shared).
bench: deps venv
	@Scripts/install-deps.sh time curl nginx
	$(SWIFT) build -c release --product modelc --static-swift-stdlib
	$(SWIFT) build -c release --product ModelcBenchmarks
	Scripts/bench.sh

# libFuzzer with AddressSanitizer over reading and validating models, bounded
# by FUZZ_SECONDS; its own scratch path keeps the instrumented build apart.
fuzz: deps
	$(SWIFT) build -c release --product ModelFuzzer --scratch-path .build/fuzz-build \
	    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DMODELC_FUZZING -Xswiftc -use-ld=lld
	Scripts/fuzz.sh .build/fuzz-build/release/ModelFuzzer

clean:
	$(SWIFT) package clean
	rm -rf .build/spec-check
