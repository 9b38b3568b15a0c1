#!/usr/bin/env bash
# Builds Calypso's image and runs it for real (docs/deploy.md, "Containers"), then the compose stack; tears
# everything down at the end. Minutes, not seconds: not part of the test suite.
#
#   deploy/check-container.sh [PDF]
#
# 1. builds the image (and the stack's PostgreSQL and nginx images) FROM $BASE, prints its size;
# 2. `podman run`s it (embedded SQLite) and times the start until /readyz answers 200; uploads the PDF and asks
#    through the OpenAI SDK, checking the answer cites the PDF on the expected page;
# 3. brings the compose stack up (each tier once the one before is healthy, by the compose file's own health
#    checks), uploads the PDF through one API process, waits for the worker to parse it, asks the other API
#    process, opens the citation's signed link on the first, and streams an answer through the proxy;
# 4. prints each process's memory, and removes the containers, volumes and networks it made.
#
# Environment: BASE (a Debian bookworm image with python3; default the local one that
# ../shared/tools/containers/make-base-image.sh makes), PYTHON (with the openai package; default .venv's),
# COMPOSE (podman-compose 1.1 or later), PODMAN, QUESTION / EXPECT / EXPECT_PAGE (defaults: the Alps PDF's),
# CA_BUNDLE (mounted into builds so pip trusts the host's proxy), *_PORT (see below).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
pdf=${1:-${CALYPSO_EVAL_DATA:-$repo/../shared/data}/alps-wiki-qa/alps_wiki.pdf}
BASE=${BASE:-localhost/debian:bookworm-slim-local}
PYTHON=${PYTHON:-$repo/.venv/bin/python}
COMPOSE=${COMPOSE:-podman-compose}
PODMAN=${PODMAN:-podman}
QUESTION=${QUESTION:-What did the Frankish expansion and the Bavarian expansion introduce?}
EXPECT=${EXPECT:-feudalism}
EXPECT_PAGE=${EXPECT_PAGE:-14}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
TAG=${TAG:-check}
SINGLE_PORT=${SINGLE_PORT:-18080}
export PROXY_PORT=${PROXY_PORT:-18090} API1_PORT=${API1_PORT:-18091} API2_PORT=${API2_PORT:-18092}
export DB_PORT=${DB_PORT:-15433} API1_GRPC_PORT=${API1_GRPC_PORT:-15051} API2_GRPC_PORT=${API2_GRPC_PORT:-15052}

[ -f "$pdf" ] || { echo "No PDF at $pdf: pass one as the first argument." >&2; exit 2; }
"$PYTHON" -c "import openai" 2>/dev/null || { echo "$PYTHON has no openai package: pip install openai" >&2; exit 2; }
$PODMAN image exists "$BASE" 2>/dev/null || [[ "$BASE" != localhost/* ]] \
    || { echo "No base image $BASE: make it with ../shared/tools/containers/make-base-image.sh" >&2; exit 2; }

image=localhost/calypso:$TAG
project=calypso-check
single=calypso-check-single
compose_files=(-f "$repo/deploy/compose.yaml" -f "$repo/deploy/compose.host-network.yaml")
# Every container here: host networking (no bridge on such machines) and limits the host can grant.
run_flags=(--network=host --ulimit nofile=20000:20000 --ulimit nproc=4096:4096)
build_flags=(--format docker --network=host --build-arg "BASE=$BASE")
[ -f "$CA_BUNDLE" ] && build_flags+=(--volume "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro")

export APP_IMAGE=$image POSTGRES_IMAGE=localhost/calypso-postgres:$TAG
export PROXY_IMAGE=localhost/calypso-proxy:$TAG BASE
export POSTGRES_PASSWORD=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(16))')
export CALYPSO_SIGNING_SECRET=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(32))')
export CALYPSO_ADMIN_KEY=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(24))')
export CALYPSO_PUBLIC_BASE_URL=http://127.0.0.1:$PROXY_PORT

compose() { $COMPOSE -p "$project" "${compose_files[@]}" "$@" 2> >(grep -v "systemd" >&2); }

cleanup() {
    $PODMAN rm -f -v "$single" >/dev/null 2>&1 || true
    $PODMAN volume rm -f "$single-home" >/dev/null 2>&1 || true
    compose down -v >/dev/null 2>&1 || true
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

# Until `podman healthcheck run` (the image's or the compose file's own check) passes; podman here has no
# systemd to run health checks on a timer, so compose's `condition: service_healthy` cannot wait by itself.
wait_healthy() {
    local name=$1 deadline=$((SECONDS + ${2:-180}))
    until $PODMAN healthcheck run "$name" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || { echo "$name not healthy; its log:" >&2; $PODMAN logs --tail 30 "$name" >&2; exit 1; }
        sleep 1
    done
    echo "$name healthy"
}

# Resident and peak memory of each Calypso or PostgreSQL process in a container.
memory() {
    $PODMAN exec "$1" sh -c 'for d in /proc/[0-9]*; do
        [ "$d" = "/proc/$$" ] && continue
        cmd=$(tr "\0" " " <"$d/cmdline" 2>/dev/null | cut -c1-70)
        case "$cmd" in *calypso*|postgres*) awk -v cmd="$cmd" "/^VmHWM/{h=\$2} /^VmRSS/{r=\$2} END{printf \"  %-70s RSS %4d MB, peak %4d MB\n\", cmd, r/1024, h/1024}" "$d/status";; esac
    done' 2>/dev/null
}

admin_key() {  # a workspace key, made through the admin API
    curl -fsS -X POST "$1/v1/admin/keys" -H "Authorization: Bearer $CALYPSO_ADMIN_KEY" \
        -H 'content-type: application/json' -d '{"workspace": "check", "name": "check-container"}' \
        | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["key"])'
}

# The OpenAI SDK's part: upload through $1, ask $2, check the citation, open its link on $1, stream via $3.
ask() {
    "$PYTHON" - "$@" "$pdf" "$QUESTION" "$EXPECT" "$EXPECT_PAGE" <<'PY'
import sys, time

import httpx
from openai import OpenAI

upload_url, ask_url, stream_url, key, pdf, question, expect, page = sys.argv[1:]
uploader, asker = OpenAI(base_url=upload_url + "/v1", api_key=key), OpenAI(base_url=ask_url + "/v1", api_key=key)
start = time.monotonic()
with open(pdf, "rb") as f:
    file = uploader.files.create(file=f, purpose="assistants")
while file.status == "uploaded":
    time.sleep(0.25)
    file = uploader.files.retrieve(file.id)
assert file.status == "processed", file
print(f"uploaded {file.filename} through {upload_url}: {file.status} after {time.monotonic() - start:.1f} s ({file.id})")

response = asker.responses.create(model="calypso-rag-agent", input=question)
message = next(o for o in response.output if o.type == "message")
annotations = message.content[0].annotations
print(f"asked {ask_url}: {question}\nanswer: {response.output_text}")
cited = [a for a in annotations if a.file_id == file.id]
assert cited, f"no citation of {file.id}: {annotations}"
first = cited[0].model_dump()
print(f"citation: {first['filename']} ({first['_aicore']['locator_label']}, support {first['_aicore']['support_score']}): "
      f"{first['file_citation']['quote']!r}")
assert expect.lower() in response.output_text.lower(), f"{expect!r} is not in the answer"
assert first["_aicore"]["page_number"] == int(page), f"cited page {first['_aicore']['page_number']}, expected {page}"

chat = asker.chat.completions.create(model="calypso-rag-agent", messages=[{"role": "user", "content": question}])
link = chat.choices[0].message.model_extra["citations"][0]["url"]
on_uploader = upload_url + link[link.index("/v1/files/"):]  # signed by the asking process, opened on the other
head, get = httpx.head(on_uploader), httpx.get(on_uploader)
print(f"citation link {link.split('?')[0]}: HEAD {head.status_code}, GET {get.status_code} on {upload_url} "
      f"({len(get.content)} bytes of {get.headers['content-type']})")
assert head.status_code == get.status_code == 200 and head.content == b""

events, first_text, begin = [], None, time.monotonic()
with httpx.stream("POST", stream_url + "/v1/responses", headers={"Authorization": f"Bearer {key}"},
                  json={"model": "calypso-rag-agent", "input": question, "stream": True}, timeout=60) as r:
    for line in r.iter_lines():
        if line.startswith("event: "):
            events.append(line[7:])
            if first_text is None and events[-1] == "response.output_text.delta":
                first_text = time.monotonic() - begin
assert "response.output_text.annotation.added" in events and events[-1] == "response.completed", events
print(f"streamed through {stream_url}: {len(events)} events, first text after {first_text:.2f} s, "
      f"{events.count('response.output_text.annotation.added')} annotation event(s), ending {events[-1]}")
PY
}

step "images FROM $BASE"
t=$SECONDS
$PODMAN build "${build_flags[@]}" -t "$image" "$repo" >/tmp/calypso-check-build.log 2>&1 \
    || { tail -30 /tmp/calypso-check-build.log; exit 1; }
$PODMAN build "${build_flags[@]}" -t "$POSTGRES_IMAGE" "$repo/deploy/postgres" >>/tmp/calypso-check-build.log 2>&1
$PODMAN build "${build_flags[@]}" -t "$PROXY_IMAGE" "$repo/deploy/proxy" >>/tmp/calypso-check-build.log 2>&1
echo "built in $((SECONDS - t)) s"
base_size=$($PODMAN image inspect "$BASE" --format '{{.Size}}' 2>/dev/null || echo 0)
for name in "$image" "$POSTGRES_IMAGE" "$PROXY_IMAGE"; do
    size=$($PODMAN image inspect "$name" --format '{{.Size}}')
    echo "$name: $((size / 1000000)) MB ($(((size - base_size) / 1000000)) MB over the base's $((base_size / 1000000)) MB)"
done

step "one container, embedded SQLite: podman run until /readyz answers"
$PODMAN volume create "$single-home" >/dev/null
begin=$("$PYTHON" -c 'import time; print(time.time())')
$PODMAN run -d --name "$single" "${run_flags[@]}" -v "$single-home:/var/lib/calypso" \
    -e CALYPSO_PORT="$SINGLE_PORT" -e CALYPSO_GRPC_PORT=15050 -e CALYPSO_ADMIN_KEY="$CALYPSO_ADMIN_KEY" \
    "$image" >/dev/null 2> >(grep -v systemd >&2)
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$SINGLE_PORT/readyz")" = 200 ]; do sleep 0.05; done
"$PYTHON" -c "import time; print(f'ready {time.time() - $begin:.2f} s after podman run')"
wait_healthy "$single" 30  # the image's HEALTHCHECK (/healthz)
echo "runs as: $($PODMAN exec "$single" id)"
key=$(admin_key "http://127.0.0.1:$SINGLE_PORT")
url=http://127.0.0.1:$SINGLE_PORT
ask "$url" "$url" "$url" "$key"
memory "$single"
$PODMAN rm -f -v "$single" >/dev/null 2>&1

step "compose: PostgreSQL, two API processes, a worker, nginx"
compose up -d --no-build db >/dev/null
wait_healthy "${project}_db_1" 120
compose up -d --no-build api1 api2 worker >/dev/null
wait_healthy "${project}_api1_1"
wait_healthy "${project}_api2_1"
compose up -d --no-build proxy >/dev/null
wait_healthy "${project}_proxy_1" 60
for port in "$API1_PORT" "$API2_PORT"; do
    curl -fsS "http://127.0.0.1:$port/readyz" | "$PYTHON" -c \
        "import json, sys; c = json.load(sys.stdin)['checks']; print('api on $port: database', c['database']['backend'], '| ingest workers', c['ingest_workers']['started'], '| embed workers', c['embed_workers']['started'])"
done
key=$(admin_key "http://127.0.0.1:$PROXY_PORT")
ask "http://127.0.0.1:$API1_PORT" "http://127.0.0.1:$API2_PORT" "http://127.0.0.1:$PROXY_PORT" "$key"
for service in api1 api2 worker db; do
    echo "${project}_${service}_1:"
    memory "${project}_${service}_1"
done
echo "proxy served: $($PODMAN logs "${project}_proxy_1" 2>/dev/null | grep -c ' HTTP/1.1" ') requests"

step "tearing down"
cleanup
trap - EXIT
echo "ok"
