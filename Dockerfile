# etserve: ExecuTorch programs over the Open Inference Protocol (KServe v2).
#
# Production (CUDA) image, built from source inside the build stage:
#   docker build --network host \
#     --build-arg EXECUTORCH_INDEX_URL=<PyTorch wheel index for CUDA 13.0> \
#     --build-arg EXECUTORCH_VERSION=1.5.1 -t etserve:cuda .
#
# CPU image from the jar the host build already made (`mvn package`), on bases that need no
# registry (.ci/base-images.sh makes them):
#   docker build --network host --build-arg APP_JAR_SOURCE=prebuilt \
#     --build-arg BUILD_BASE=etserve-base/tools-cpu:trixie \
#     --build-arg RUNTIME_BASE=etserve-base/runtime-cpu:trixie -t etserve:cpu .
#
# Both paths leave the same layout: /opt/etserve/app.jar, /opt/etserve/native (the jar's JNI
# bridge and ExecuTorch libraries, linkage-checked), /models (the demo models).
# One build stage serves both sources, chosen by APP_JAR_SOURCE rather than --target: the
# classic builder (which Testcontainers drives) builds every stage before the target, so an
# alternative stage would still need its base image.

# The stage that produces the jar and its native libraries. With APP_JAR_SOURCE=build it needs
# apt (it installs a JDK 17, Maven, Python 3 with venv, a C++ compiler, unzip and binutils);
# with APP_JAR_SOURCE=prebuilt the base must already have unzip, binutils and ldd.
ARG BUILD_BASE=nvidia/cuda:13.0.1-devel-ubuntu24.04
# Needs glibc >= 2.28 and libstdc++ (the ExecuTorch wheel is manylinux_2_28); a JRE 25 is
# installed with apt when the base has no `java` (JRE_PACKAGE; 17 works, with CDS in place of
# the AOT cache).
ARG RUNTIME_BASE=nvidia/cuda:13.0.1-runtime-ubuntu24.04

FROM ${BUILD_BASE} AS app
SHELL ["/bin/bash", "-euo", "pipefail", "-c"]
# Marks this stage's images, so tests can prune the leftovers of their own builds.
LABEL io.etserve.stage=app
# build: Maven builds the bridge and the jar here. prebuilt: take target/etserve-*.jar.
ARG APP_JAR_SOURCE=build
# Empty: the wheel pinned in native/requirements.txt (PyPI, CPU only). Set: install
# executorch==EXECUTORCH_VERSION from this index instead (the CUDA wheel).
ARG EXECUTORCH_INDEX_URL=
ARG EXECUTORCH_VERSION=1.5.1
ARG MAVEN_BUILD_ARGS="-B -q -DskipTests"
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY . /src
RUN case "$APP_JAR_SOURCE" in \
      prebuilt) exit 0 ;; \
      build) ;; \
      *) echo "APP_JAR_SOURCE must be build or prebuilt, not '$APP_JAR_SOURCE'" >&2; exit 2 ;; \
    esac; \
    apt-get update -qq; \
    apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven \
      python3 python3-venv g++ unzip binutils ca-certificates >/dev/null; \
    rm -rf /var/lib/apt/lists/*; \
    bash native/build.sh setup; \
    if [[ -n "$EXECUTORCH_INDEX_URL" ]]; then \
      .venv/bin/python -m pip install --quiet --no-deps --force-reinstall \
        --index-url "$EXECUTORCH_INDEX_URL" "executorch==$EXECUTORCH_VERSION"; \
      # The CUDA wheel's caller-stream library is the one its CUDA delegate links: the \
      # bridge must link that same file, or the process holds two selections (NOTES §2). \
      wheel_caller_stream="$(find "$PWD/.venv" -name 'libexecutorch_extension_cuda.so*' -print -quit)"; \
      if [[ -n "$wheel_caller_stream" ]]; then export ETSERVE_CALLER_STREAM_LIBRARY="$wheel_caller_stream"; fi; \
      # Its CUDA delegate (CudaBackend) and AOTI shims are found by native/cmake/CudaBackend.cmake \
      # (executorch::backend_cuda) and staged with delegates.list; the gate below checks them. \
    fi; \
    rm -f target/etserve-*.jar; \
    mvn $MAVEN_BUILD_ARGS package
# Same layout from either source; the linkage gate runs on the very directory the runtime gets.
RUN jars=(target/etserve-*.jar); \
    if [[ ${#jars[@]} -ne 1 || ! -f "${jars[0]}" ]]; then \
      echo "expected exactly one target/etserve-*.jar (APP_JAR_SOURCE=$APP_JAR_SOURCE), found: ${jars[*]}" >&2; exit 1; \
    fi; \
    mkdir -p /out/opt/etserve/native /out/models; \
    cp "${jars[0]}" /out/opt/etserve/app.jar; \
    # Spring Boot keeps resources under BOOT-INF/classes/; a plain jar at its root. \
    unzip -q -j /out/opt/etserve/app.jar '*META-INF/etserve/native/linux-x86_64/*' -d /out/opt/etserve/native; \
    test -f /out/opt/etserve/native/libraries.txt; \
    # A jar keeps no file modes: the first-call trial's program must run as the service's user. \
    chmod 755 /out/opt/etserve/native/etserve-first-call; \
    cp -r models/. /out/models/; \
    cp scripts/aot-training.sh /out/opt/etserve/aot-training.sh; \
    bash native/scripts/check-linkage.sh --dir /out/opt/etserve/native

FROM ${RUNTIME_BASE} AS runtime
SHELL ["/bin/bash", "-euo", "pipefail", "-c"]
ARG JRE_PACKAGE=openjdk-25-jre-headless
RUN if ! command -v java >/dev/null; then \
      apt-get update -qq; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$JRE_PACKAGE" >/dev/null; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    java -version; \
    groupadd --gid 10001 etserve; \
    useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin etserve
COPY --from=app /out/ /
# The libraries must resolve against this image's glibc and libstdc++, not the build stage's.
# The CUDA driver (libcuda.so.1), which the CUDA delegate may need, comes with the container
# runtime on a GPU node, never from the image.
RUN unresolved=""; \
    for lib in /opt/etserve/native/*.so* /opt/etserve/native/etserve-first-call; do \
      out="$(LD_LIBRARY_PATH=/opt/etserve/native ldd "$lib" 2>&1 | grep -v 'libcuda\.so\.1 => not found')" || true; \
      if grep -Eq 'not found|not a dynamic executable' <<<"$out"; then unresolved+="$lib: $out"$'\n'; fi; \
    done; \
    if [[ -n "$unresolved" ]]; then echo "unresolved in the runtime image:"; echo "$unresolved"; exit 1; fi

# Startup: the extracted jar (plain jars on the class path, no nested-jar loading) and an
# ahead-of-time cache from one training run on the demo models (CPU: there is no GPU at build
# time; the classes are the same). Java 25 (-XX:AOTCacheOutput): the service answers 2 x 2,000
# JSON inference calls first (scripts/aot-training.sh), so the cache holds the request path's
# classes and method profiles too, and a new container's first requests cost less
# (bench/results/2026-12-05-2core-grpc-and-tail.md, section 6); older JREs: a CDS archive of
# a run that exits after the context refresh. The JVM options the entrypoint needs for either go
# to an argument file. Should the training fail, or the cache not fit the JVM at run time
# (another GC, for one), the service starts without it. With the cache, the jar's own class
# preloading (StartupClassPreload) is off: the classes come from the cache, and the threads
# only cost CPU (bench/results/2026-12-05-startup-class-preload.md).
# Reflection through native accessors (-Djdk.reflect.useNativeAccessorOnly=true): the JDK's
# default builds a method handle and spins classes for each constructor and method that
# reflection first calls, which the start does for hundreds (configuration binding, Spring's
# own); the request path calls none, so its slower native calls cost nothing there (same
# results file).
# Spring's ahead-of-time mode (-Dspring.aot.enabled=true): the context's bean definitions were
# generated when the jar was built (spring-boot:process-aot), so no configuration class is parsed
# and no condition evaluated at startup; a container whose settings would change which beans exist
# builds the context itself instead (AotFixedSettings, docs/operations.md#start-up).
# Transparent huge pages (where the host allows them per mapping, `madvise`, the usual default)
# for the heap and the code: a request thread that slept through GPU work comes back with cold
# TLBs, which huge pages make cheaper, so the request threads spend less CPU per GPU call
# (bench/results/gpu-h200-jvm-options.txt). Where the host's THP is `never`
# the JVM says so in one warning line at start and runs as before.
# The training run's heap is fixed (-Xmx2g): a cache keeps the compressed-oops mode of the JVM
# that wrote it, and one sized from a large build host's memory (over 32 GB of heap, no
# compressed oops) would be refused, silently, by every container of the usual size.
RUN cd /opt/etserve && java -Djarmode=tools -jar app.jar extract --destination /opt/etserve/app >/dev/null; \
    test -f /opt/etserve/app/app.jar; \
    feature="$(java -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2; exit}')"; \
    if (( feature >= 25 )); then \
      train=(-XX:AOTCacheOutput=/opt/etserve/app.aot -Xlog:aot=off -Xlog:cds=off); \
      run=(-XX:AOTCache=/opt/etserve/app.aot -Xlog:aot=off -Xlog:cds=off); cache=/opt/etserve/app.aot; \
    else \
      train=(-XX:ArchiveClassesAtExit=/opt/etserve/app.jsa); \
      run=(-XX:SharedArchiveFile=/opt/etserve/app.jsa -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off); cache=/opt/etserve/app.jsa; \
    fi; \
    run+=(-Detserve.startup.preload-threads=0); \
    mkdir -p /tmp/aot-training; \
    jvm=(-Xmx2g --enable-native-access=ALL-UNNAMED -XX:+UseTransparentHugePages -Dspring.aot.enabled=true -Djdk.reflect.useNativeAccessorOnly=true -Detserve.startup.preload-threads=0 \
      -Dorg.bytedeco.javacpp.cachedir=/tmp/aot-training/javacpp "${train[@]}"); \
    if (( feature >= 25 )); then \
      ETSERVE_MODEL_REPOSITORY=/models ETSERVE_NATIVE_LIBRARY_DIR=/opt/etserve/native TMPDIR=/tmp/aot-training \
        timeout 300 bash /opt/etserve/aot-training.sh /tmp/aot-training.log 2000 "${jvm[@]}"; \
    else \
      ETSERVE_MODEL_REPOSITORY=/models ETSERVE_NATIVE_LIBRARY_DIR=/opt/etserve/native TMPDIR=/tmp/aot-training \
        java "${jvm[@]}" -Dspring.context.exit=onRefresh \
        -jar /opt/etserve/app/app.jar --server.port=0 --management.server.port=0 --etserve.grpc.port=0 >/tmp/aot-training.log 2>&1; \
    fi \
      && [[ -s "$cache" ]] \
      || { echo "AOT/CDS training run failed; the image starts without a cache:"; tail -5 /tmp/aot-training.log; rm -f "$cache"; run=(); }; \
    printf '%s\n' --enable-native-access=ALL-UNNAMED -XX:+UseTransparentHugePages -Dspring.aot.enabled=true \
      -Djdk.reflect.useNativeAccessorOnly=true "${run[@]}" > /opt/etserve/jvm.args; \
    rm -rf /tmp/aot-training /tmp/aot-training.log /opt/etserve/aot-training.sh; \
    chmod -R a+rX /opt/etserve

LABEL org.opencontainers.image.title="etserve" \
      org.opencontainers.image.description="ExecuTorch programs served over the Open Inference Protocol (KServe v2)"
# Everything written at run time goes to /tmp (Jetty, the JavaCPP cache, the CUDA delegate's
# compiled .so, the private copies of served programs), so the root file system can be
# read-only with a tmpfs at /tmp. That tmpfs must allow exec (JavaCPP and the delegate load
# libraries from it); Docker's --tmpfs default is noexec: `--tmpfs /tmp:rw,exec,nosuid,nodev,mode=1777`.
# On a tmpfs the program copies take memory: for a repository nothing writes to while the
# container runs, pass --etserve.repository.private-copies=false (the Helm chart decides by source).
ENV ETSERVE_MODEL_REPOSITORY=/models \
    ETSERVE_NATIVE_LIBRARY_DIR=/opt/etserve/native \
    TMPDIR=/tmp \
    JAVA_TOOL_OPTIONS="-Dorg.bytedeco.javacpp.cachedir=/tmp/javacpp -XX:MaxRAMPercentage=50 -XX:MaxDirectMemorySize=1g"
USER 10001:10001
WORKDIR /opt/etserve
EXPOSE 8080 8081 8001
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${MANAGEMENT_SERVER_PORT:-8081} && printf 'GET /actuator/health/liveness HTTP/1.0\\r\\n\\r\\n' >&3 && read -r status <&3 && [[ $status == *' 200 '* ]]"]
ENTRYPOINT ["java", "@/opt/etserve/jvm.args", "-jar", "/opt/etserve/app/app.jar"]
