# How the suite travels to a GPU host that has no Java, Maven or network (sourced by
# scripts/gpu-suite.sh): `bundle` packs three parts, each small enough to go beside the work tree
# in one transfer of a remote runner (64 MiB), and the unpack functions put them under $WORK.
bundle() {
  cd "$ROOT"
  local jar; jar="$(ls target/etserve-*.jar 2>/dev/null | grep -v -- '-plain' | head -1 || true)"
  [[ -n "$jar" && -d target/test-classes ]] || die "run mvn verify first (no target/etserve-*.jar or target/test-classes)"
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/stage1" "$BUNDLE/stage2" "$BUNDLE/stage3"
  # The JRE is the one the image ships (25: AOT cache); the JDK that built the jar otherwise.
  local jdk; jdk="$(bash "$ROOT/scripts/java-home.sh")"
  [[ -n "$jdk" ]] || { jdk="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"; log "no JDK 25 here: the bundle's JRE is $jdk"; }

  log "stage1: ExecuTorch SDK, the caller-stream library and the JNI headers"
  local sp; sp="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  local jni="$BUNDLE/jni-tree"
  mkdir -p "$jni/jni/include/linux"
  cp "$jdk/include/jni.h" "$jni/jni/include/" && cp "$jdk/include/linux/jni_md.h" "$jni/jni/include/linux/"
  tar -cf - -C "$sp" executorch/lib executorch/include executorch/share \
      -C "$ROOT/.venv/caller-stream" libextension_cuda.so -C "$jni" jni \
    | xz -9 -T"$(nproc)" > "$BUNDLE/stage1/sdk.tar.xz"
  rm -rf "$jni"
  log "stage1: JRE ($jdk, jlink; xz over an uncompressed image is smaller than jlink's zip)"
  # --generate-cds-archive: the JDK's base CDS archive, which a dynamic (application) archive needs.
  "$jdk/bin/jlink" --add-modules "$JRE_MODULES" --strip-debug --no-man-pages --no-header-files \
    --generate-cds-archive --compress=zip-0 --output "$BUNDLE/jre" >/dev/null 2>&1 \
    || "$jdk/bin/jlink" --add-modules "$JRE_MODULES" --strip-debug --no-man-pages --no-header-files \
         --generate-cds-archive --compress=0 --output "$BUNDLE/jre"
  tar -C "$BUNDLE" -cf - jre | xz -9 -T"$(nproc)" > "$BUNDLE/stage1/jre.tar.xz"
  rm -rf "$BUNDLE/jre"

  log "stage2 and stage3: the extracted application jar and its libraries, the test classes"
  local app="$BUNDLE/app"
  rm -rf "$app" && mkdir -p "$app"
  (cd "$BUNDLE" && "$jdk/bin/java" -Djarmode=tools -jar "$ROOT/$jar" extract --destination "$app" >/dev/null) \
    || die "could not extract $jar"
  [[ -f "$app/$(basename "$jar")" ]] && mv "$app/$(basename "$jar")" "$app/etserve.jar"
  # The in-process GPU tests and benchmark need the runtime, CUDA and Spring's core only: the
  # server's libraries (HTTP, gRPC, protobuf, metrics export, JSON) go in stage3.
  local server_libs='^(grpc|netty|protobuf|proto-google|guava|failureaccess|jetty|jakarta|prometheus|spring-web|spring-boot-(jetty|web|actuator|micrometer|http)|jackson|perfmark|error_prone|animal|j2objc|annotations|gson|opentelemetry|micrometer-registry)'
  mkdir -p "$app/server-lib"
  for lib in "$app"/lib/*.jar; do
    [[ "$(basename "$lib")" =~ $server_libs ]] && mv "$lib" "$app/server-lib/"
  done
  tar -C "$app" -cf "$BUNDLE/stage2/app.tar" etserve.jar lib
  tar -C "$app" -cf "$BUNDLE/stage3/server-lib.tar" server-lib
  # The data-path step's unplanned 4 MiB program (2 KB; its reference is written on the host).
  local bench_model=affine-4mib-unplanned
  [[ -f target/bench-models/$bench_model/1/model.pte ]] || bash scripts/export/export.sh --bench "$bench_model" >&2 \
    || die "could not export $bench_model"
  tar -C target -cf "$BUNDLE/stage3/bench-models.tar" "bench-models/$bench_model/config.yml" \
    "bench-models/$bench_model/1/model.pte"
  rm -rf "$app"
  # The test models are read from the work tree (src/test/resources), not from the classpath copy.
  tar -C target --exclude='test-classes/models' -cf - test-classes | xz -9 > "$BUNDLE/stage2/test-classes.tar.xz"
  # Plain `mvn` (not -o): the dependency plugin itself may not be in a fresh local repository.
  mvn -q -B dependency:copy -Dartifact="$JUNIT_CONSOLE" -DoutputDirectory="$BUNDLE/stage1" \
    || die "could not fetch $JUNIT_CONSOLE"
  mvn -q -B dependency:copy -Dartifact="$ASSERTJ" -DoutputDirectory="$BUNDLE/stage1" || die "could not fetch $ASSERTJ"
  du -sh "$BUNDLE"/stage*
  # One transfer carries the work tree (its tracked files) and one part: 64 MiB in all.
  local tree; tree="$(git ls-files -z | xargs -0 stat -c %s | awk '{n += $1} END {print n}')"
  local limit=$((63 * 1024 * 1024 - tree))
  for part in stage1 stage2 stage3; do
    local size; size="$(du -sb "$BUNDLE/$part" | cut -f1)"
    (( size < limit )) || die "$part is $size bytes: with the work tree ($tree bytes) over 63 MiB"
  done
}

unpack_stage1() {
  [[ -d "$BUNDLE/stage1" ]] || die "no $BUNDLE/stage1: run 'scripts/gpu-suite.sh bundle' on a build machine"
  rm -rf "$WORK" && mkdir -p "$WORK"
  log "unpacking stage1 into $WORK"
  unpack_xz "$BUNDLE/stage1/jre.tar.xz" "$WORK"
  unpack_xz "$BUNDLE/stage1/sdk.tar.xz" "$WORK"
  cp "$BUNDLE"/stage1/*.jar "$WORK/"  # the JUnit console and AssertJ, for stage2
  export JAVA_HOME="$WORK/jni"
}

# Unpacks the parts of the application this transfer carried into $WORK/app (kept between
# calls on one host): stage2 (the jar, its core libraries, the test classes), stage3 (the
# server's libraries, the data-path step's program). Sets JAVA, JAR and CHECK_CP.
unpack_app() {
  local app="$WORK/app"
  mkdir -p "$app"
  if [[ -f "$BUNDLE/stage2/app.tar" ]]; then
    rm -rf "$app/etserve.jar" "$app/lib" && tar -C "$app" -xf "$BUNDLE/stage2/app.tar"
    unpack_xz "$BUNDLE/stage2/test-classes.tar.xz" "$WORK"
  fi
  if [[ -f "$BUNDLE/stage3/server-lib.tar" ]]; then
    rm -rf "$app/server-lib" && tar -C "$app" -xf "$BUNDLE/stage3/server-lib.tar"
    mv "$app"/server-lib/*.jar "$app/lib/" 2>/dev/null || die "stage3 before stage2: run stage2 on this host first"
    [[ ! -f "$BUNDLE/stage3/bench-models.tar" ]] || tar -C "$WORK" -xf "$BUNDLE/stage3/bench-models.tar"
  fi
  [[ -f "$app/etserve.jar" ]] || die "no application in $WORK: run stage2 on this host first"
  JAVA="$WORK/jre/bin/java" JAR="$app/etserve.jar"
  CHECK_CP="$app/etserve.jar:$WORK/test-classes:$(ls "$app"/lib/*.jar | tr '\n' ':')$(ls "$WORK"/assertj-core-*.jar)"
}

# The server's libraries are there (stage3 unpacked).
have_server() { ls "$WORK"/app/lib/jetty-server-*.jar >/dev/null 2>&1 || die "no server libraries in $WORK: run stage3 on this host first"; }

# Here: .device/clients, the wheels of Triton's Python clients for the GPU host's Python 3.12
# (src/test/python/requirements-gpu.txt, every package pinned, none resolved): a transfer of its own.
bundle_clients() {
  cd "$ROOT"
  local into="$BUNDLE/clients" platform=() p
  for p in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
    platform+=(--platform "${p}_x86_64")
  done
  rm -rf "$into" && mkdir -p "$into"
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platform[@]}" -r src/test/python/requirements-gpu.txt -d "$into" \
    || die "could not download the clients' wheels"
  du -sh "$into"
}

# There: the carried wheels unzipped into $WORK/clients (a PYTHONPATH; no pip, no venv needed).
# Prints the folder.
unpack_clients() {
  local site="$WORK/clients" wheel
  [[ -d "$BUNDLE/clients" ]] || die "no $BUNDLE/clients: run 'scripts/gpu-suite.sh bundle-clients' on a build machine"
  rm -rf "$site" && mkdir -p "$site"
  for wheel in "$BUNDLE"/clients/*.whl; do
    python3 -m zipfile -e "$wheel" "$site" || die "could not unpack $wheel"
  done
  echo "$site"
}

# Triton's perf_analyzer, as bench/perf-analyzer.sh pins it: one manylinux_2_38 wheel with the C++
# binary inside, which the GPU host's glibc (2.39) runs as it is.
PA_VERSION="${PA_VERSION:-2.60.0}"

# Here: .device/perf-analyzer, its wheel (7 MB): a transfer of its own, or beside stage2.
bundle_perf_analyzer() {
  cd "$ROOT"
  local into="$BUNDLE/perf-analyzer"
  rm -rf "$into" && mkdir -p "$into"
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_38_x86_64 -d "$into" "perf-analyzer==$PA_VERSION" \
    || die "could not download perf-analyzer==$PA_VERSION"
  du -sh "$into"
}

# There: the carried wheel unzipped into $WORK/perf-analyzer. Prints the binary's path.
unpack_perf_analyzer() {
  local dir="$WORK/perf-analyzer" wheel
  wheel="$(ls "$BUNDLE"/perf-analyzer/perf_analyzer-"$PA_VERSION"-*.whl 2>/dev/null | head -1)"
  [[ -n $wheel ]] || die "no perf-analyzer $PA_VERSION wheel in $BUNDLE/perf-analyzer: run 'scripts/gpu-suite.sh bundle-perf-analyzer' on a build machine"
  rm -rf "$dir" && mkdir -p "$dir"
  python3 -m zipfile -e "$wheel" "$dir" || die "could not unpack $wheel"
  chmod +x "$dir/perf_analyzer/bin/perf_analyzer"
  echo "$dir/perf_analyzer/bin/perf_analyzer"
}

# Here, after bundle (which clears .device): .device/stage3/base/etserve.jar, the application jar
# of commit $1 as bundle extracts its own, built Java-only on this tree's native libraries (as
# bench/lib.sh's baselines: native/ must not differ). It travels with stage3; the data-path step
# serves it beside the bundle's with ETSERVE_DATA_PATH_BASELINE_JAR=.device/stage3/base/etserve.jar.
bundle_baseline() {
  local ref="${1:-}" src jdk
  cd "$ROOT"
  [[ -n $ref ]] || die "bundle-baseline needs a commit"
  [[ -d "$BUNDLE/stage3" && -d target/native-stage ]] || die "run mvn package and 'scripts/gpu-suite.sh bundle' first"
  git diff --quiet "$ref" HEAD -- native || die "native/ differs between $ref and HEAD: the baseline cannot reuse this tree's native build"
  src="$(mktemp -d)"
  git archive "$ref" | tar -x -C "$src"
  log "building $ref in $src (Java only, this tree's native libraries)"
  (cd "$src" && mvn -B -q -ntp -DskipTests -DskipNative=true -Dnative.stage.dir="$ROOT/target/native-stage" package) \
    || { rm -rf "$src"; die "could not build $ref"; }
  jdk="$(bash "$ROOT/scripts/java-home.sh")"
  [[ -n "$jdk" ]] || jdk="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"
  (cd "$src" && "$jdk/bin/java" -Djarmode=tools -jar target/etserve-0.1.0-SNAPSHOT.jar extract --destination app >/dev/null) \
    || { rm -rf "$src"; die "could not extract $ref's jar"; }
  mkdir -p "$BUNDLE/stage3/base"
  cp "$src/app/etserve-0.1.0-SNAPSHOT.jar" "$BUNDLE/stage3/base/etserve.jar"
  git rev-parse --short "$ref" > "$BUNDLE/stage3/base/commit"
  rm -rf "$src"
  local tree size
  tree="$(git ls-files -z | xargs -0 stat -c %s | awk '{n += $1} END {print n}')"
  size="$(du -sb "$BUNDLE/stage3" | cut -f1)"
  (( size + tree < 63 * 1024 * 1024 )) || die "stage3 with the baseline is $size bytes: with the work tree ($tree bytes) over 63 MiB"
  du -sh "$BUNDLE/stage3/base"
}
