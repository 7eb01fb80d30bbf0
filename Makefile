# kafka-replication-monitor — the two commands of the README, and what they need.
#
#   make demo   install what is missing, then replay docs/cases/rf1-outage-zk-chroot.md on a real local cluster
#   make test   install what is missing, then run the whole test suite
#   make check  the quick tier: lint, unit tests, the Spark golden tables (run it before every commit)
#   make docs   the documentation site from docs/ into .cache/site
#   make bench-smoke  the alert and history paths' cost at small sizes against recorded budgets (~5 min, not in
#               `make test`; run it before and after a change to either path: benchmarks/BENCHMARKS.md)
#
# Installs are idempotent and cached: the venv in .venv, jars in .cache/jars (from Maven Central,
# pinned in jvm/*.xml: Kafka 3.9.1 for ZooKeeper mode, Kafka 4.4.0 for KRaft, Spark, the JMX agent,
# the object-store connectors, HDFS for its test), Debian packages only if their command is missing
# (a JDK, Maven, Prometheus and Alertmanager for the alerting tests, chromium for the console's, MIT Kerberos'
# KDC and headers for the GSSAPI test, whose Python binding is built, nftables for the gray-failure tests' packet
# filter; services are not started: policy-rc.d blocks them).
# A second run needs no network: every step is guarded by a stamp file or a `command -v` check.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
MVN := mvn -q -B -s jvm/settings.xml -Dmaven.repo.local=$(CURDIR)/.cache/m2
JARS := .cache/jars
STAMPS := .cache/stamps
SPARK_EXCLUDES := -DexcludeGroupIds=org.apache.hadoop,org.scala-lang,org.scala-lang.modules,org.lz4,org.xerial.snappy,org.slf4j,com.google.code.findbugs,org.antlr -DexcludeArtifactIds=spark-tags_2.13
OBJECTSTORE_EXCLUDES := -DexcludeGroupIds=io.netty,org.slf4j,commons-codec,commons-logging,org.apache.httpcomponents
PYTEST_ARGS ?=

.PHONY: demo test check docs bench-smoke lint setup system-packages jars compat-jars compat venv unit clean

demo: setup
	$(VENV)/bin/krm demo

test: setup lint
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

unit: venv
	$(VENV)/bin/python -m pytest -m unit $(PYTEST_ARGS)

# The inner loop, before every commit: lint, the unit tests and the Spark golden tables (one local
# Spark session, no Kafka). `make test` (the whole suite) before a stop.
check: venv jars lint
	$(VENV)/bin/python -m pytest -m "unit or spark" $(PYTEST_ARGS)

# The documentation site (docs/, mkdocs.yml) into .cache/site; strict: a broken link or a page left out of the nav fails
docs: venv
	$(VENV)/bin/mkdocs build --strict

bench-smoke: setup
	$(VENV)/bin/python benchmarks/bench_smoke.py

setup: system-packages jars venv

system-packages:
	@missing=(); \
	command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless); \
	command -v mvn >/dev/null || missing+=(maven); \
	command -v promtool >/dev/null || missing+=(prometheus); \
	command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager); \
	command -v chromium >/dev/null || missing+=(chromium); \
	command -v chromedriver >/dev/null || missing+=(chromium-driver); \
	[ -x /usr/sbin/krb5kdc ] || missing+=(krb5-kdc krb5-admin-server); \
	command -v krb5-config >/dev/null || missing+=(libkrb5-dev); \
	command -v gcc >/dev/null || missing+=(gcc libc6-dev); \
	[ -x /usr/sbin/nft ] || missing+=(nftables); \
	ldconfig -p | grep -q 'libfuse\.so\.2 ' || missing+=(libfuse2); \
	$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv); \
	if [ $${#missing[@]} -gt 0 ]; then \
	  echo "installing Debian packages: $${missing[*]}"; \
	  blocker=; if [ ! -e /usr/sbin/policy-rc.d ]; then blocker=/usr/sbin/policy-rc.d; \
	    printf '#!/bin/sh\nexit 101\n' > $$blocker; chmod +x $$blocker; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$${missing[@]}" >/dev/null; \
	  rc=$$?; [ -z "$$blocker" ] || rm -f $$blocker; [ $$rc -eq 0 ] || exit $$rc; \
	fi

jars: $(STAMPS)/jars

$(STAMPS)/jars: jvm/kafka-pom.xml jvm/kafka4-pom.xml jvm/spark-pom.xml jvm/agent-pom.xml jvm/objectstore-pom.xml jvm/hdfs-pom.xml jvm/settings.xml
	@echo "fetching jars from Maven Central into $(JARS) (once) ..."
	rm -rf $(JARS) && mkdir -p $(STAMPS)
	$(MVN) -f jvm/kafka-pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)/kafka
	$(MVN) -f jvm/kafka4-pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)/kafka-4.4.0
	$(MVN) -f jvm/agent-pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)/agent
	$(MVN) -f jvm/spark-pom.xml dependency:copy-dependencies -DincludeScope=runtime $(SPARK_EXCLUDES) -DoutputDirectory=$(CURDIR)/$(JARS)/spark
	$(MVN) -f jvm/objectstore-pom.xml dependency:copy-dependencies -DincludeScope=runtime $(OBJECTSTORE_EXCLUDES) -DoutputDirectory=$(CURDIR)/$(JARS)/objectstore
	$(MVN) -f jvm/hdfs-pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(JARS)/hdfs
	touch $@

# The compatibility lines (lab/local_cluster.py COMPAT_VERSIONS; a unit test keeps the two lists equal):
# fetched only for `krm local-cluster --kafka-version` and the compatibility runs, never by `make test`.
COMPAT_VERSIONS := 2.8.2 3.0.2 3.1.2 3.2.3 3.3.2 3.4.1 3.5.2 3.6.2 3.7.2 3.8.1 3.9.2 4.0.2 4.1.2 4.2.2 4.3.1

compat-jars: venv
	@for v in $(COMPAT_VERSIONS); do \
	  [ -n "$$(ls $(JARS)/kafka-$$v/*.jar 2>/dev/null)" ] && continue; \
	  case $$v in 4.*) pom=jvm/kafka4-pom.xml ;; *) pom=jvm/kafka-pom.xml ;; esac; \
	  tools=$$v; [ $$v = 3.4.1 ] && tools=3.4.0; \
	  echo "fetching Kafka $$v into $(JARS)/kafka-$$v ..."; \
	  $(MVN) -f $$pom dependency:copy-dependencies -Dkafka.version=$$v -Dkafka.tools.version=$$tools \
	    -DoutputDirectory=$(CURDIR)/$(JARS)/kafka-$$v || { rm -rf $(JARS)/kafka-$$v; exit 1; }; \
	done

# krm against every line beside its own kafka-topics (times in README); rewrites README's table.
compat: setup compat-jars
	$(VENV)/bin/python benchmarks/compat.py --readme

venv: $(STAMPS)/venv

$(STAMPS)/venv: pyproject.toml
	@echo "creating $(VENV) and installing pinned Python packages (once) ..."
	mkdir -p $(STAMPS)
	[ -x $(VENV)/bin/python ] || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) .cache .krm .pytest_cache
