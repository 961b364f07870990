#!/bin/bash
test_description='serve over TLS: a self-signed certificate, plaintext refused, clear errors for bad files, no plain listen beyond loopback'
. "$(dirname "$0")/../lib/test-lib.sh"

nojudge='runtime: {judge: false}'

# mkcert DIR NAME: a self-signed EC certificate for 127.0.0.1 and
# localhost, DIR/NAME.crt and DIR/NAME.key (mode 600)
mkcert() {
	mkdir -p "$1" &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-nodes -days 2 -subj "/CN=localhost" \
		-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
		-keyout "$1/$2.key" -out "$1/$2.crt" 2>/dev/null &&
	chmod 600 "$1/$2.key"
}

# serve_fails: serve refuses to start (within 20 s), its stderr in ./err
serve_fails() {
	local rc=0
	BATON_LISTEN=127.0.0.1:0 timeout 20 "$BATON" serve --workers 1 "$@" 2>err || rc=$?
	test "$rc" = 1 || { echo "serve exited $rc:" >&2; cat err >&2; return 1; }
}

test_expect_success 'serve speaks HTTPS with server.tls; curl trusts it with --cacert' '
	mkcert "$TRASH_DIRECTORY/pki" a &&
	make_repo a &&
	baton_init_with_agent a "$nojudge
server: {tls: {cert: $TRASH_DIRECTORY/pki/a.crt, key: $TRASH_DIRECTORY/pki/a.key}}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	case $HTTP_URL in https://127.0.0.1:*) ;; *) echo "url $HTTP_URL" >&2; exit 1;; esac &&
	test_grep "dashboard at https://127.0.0.1:" ../serve.out &&
	curl -s --cacert ../pki/a.crt -o body -w "%{http_code}" \
		-H "Authorization: Bearer $HTTP_TOKEN" "$HTTP_URL/api/v1/health" >status &&
	test "$(cat status)" = 200 &&
	test_jq ".status == \"ok\"" body &&
	curl -s --cacert ../pki/a.crt -o /dev/null -w "%{http_code}" "$HTTP_URL/" >status &&
	test "$(cat status)" = 200 &&
	{ curl -s --cacert ../pki/a.crt -o sse -w "%{http_code}" --max-time 1 \
		"$HTTP_URL/api/v1/events?access_token=$HTTP_TOKEN" >status || test $? = 28; } &&
	test "$(cat status)" = 200 &&
	"$BATON" token add vera --role viewer >../viewer &&
	curl -s --cacert ../pki/a.crt -o /dev/null -w "%{http_code}" \
		-H "Authorization: Bearer $(cat ../viewer)" "$HTTP_URL/api/v1/tasks" >status &&
	test "$(cat status)" = 200
'

test_expect_success 'an untrusted certificate is refused by the client; plaintext is refused by the port' '
	cd a &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	test_expect_code 60 curl -s -o /dev/null "$HTTP_URL/api/v1/health" &&
	rm -f body &&
	plain=$(echo "$HTTP_URL" | sed "s|^https:|http:|") &&
	code=$(curl -s -o body -w "%{http_code}" --max-time 5 \
		-H "Authorization: Bearer $(cat .baton/token)" "$plain/api/v1/health") || : &&
	test "$code" != 200 &&
	! grep -q "\"status\"" body
'

test_expect_success 'baton tui --url https:// reaches it (CURL_CA_BUNDLE), with a named token' '
	cd a &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	test_expect_code 1 env CURL_CA_BUNDLE="$TRASH_DIRECTORY/pki/a.crt" \
		"$BATON" tui --url "$HTTP_URL" --token-file ../viewer </dev/null >out 2>err &&
	test_grep "needs a terminal" err &&
	test_expect_code 1 "$BATON" tui --url "$HTTP_URL" --token-file ../viewer </dev/null >out 2>err &&
	test_grep "cannot reach" err &&
	kill "$(cat ../serve.pid)" && bg_wait ../serve >/dev/null
'

test_expect_success 'a missing, unreadable, foreign or mismatched file is named' '
	mkcert "$TRASH_DIRECTORY/pki" b &&
	make_repo e &&
	baton_init_with_agent e "$nojudge" &&
	cd e &&
	pki=$TRASH_DIRECTORY/pki &&
	cp .baton/config.yaml base.yaml &&
	settls() { { cat base.yaml; echo "server: {tls: {cert: $1, key: $2}}"; } >.baton/config.yaml; } &&
	settls "$pki/none.crt" "$pki/a.key" &&
	serve_fails && test_grep "server.tls.cert: .*none.crt. does not exist" err &&
	settls "$pki/a.crt" "$pki/a.crt" &&
	serve_fails && test_grep "server.tls.key: .*a.crt. holds no PEM private key" err &&
	settls README "$pki/a.key" &&
	serve_fails && test_grep "server.tls.cert: .*/e/README. holds no PEM certificate" err &&
	settls "$pki/a.crt" "$pki/b.key" &&
	serve_fails && test_grep "the key .*b.key. is not the key of the certificate .*a.crt" err &&
	{ cat base.yaml; echo "server: {tls: {cert: $pki/a.crt}}"; } >.baton/config.yaml &&
	serve_fails && test_grep "config.yaml:[0-9]*:[0-9]*: server.tls: needs both cert and key" err
'

test_expect_success 'a key link planted in the repository is not followed' '
	cd e &&
	mkdir -p tls &&
	cp "$TRASH_DIRECTORY/pki/a.crt" tls/ &&
	ln -s "$TRASH_DIRECTORY/pki/a.key" tls/a.key &&
	{ cat base.yaml; echo "server: {tls: {cert: tls/a.crt, key: tls/a.key}}"; } >.baton/config.yaml &&
	serve_fails && test_grep "server.tls.key: cannot read .*tls/a.key.*symbolic link" err
'

test_expect_success 'a world-readable key is warned about' '
	cd e &&
	rm tls/a.key && cp "$TRASH_DIRECTORY/pki/a.key" tls/a.key && chmod 644 tls/a.key &&
	serve_http "$TRASH_DIRECTORY/serve-e" --workers 1 &&
	test_grep "TLS key .*tls/a.key. is readable by every user" ../serve-e.out &&
	kill "$(cat ../serve-e.pid)" && bg_wait ../serve-e >/dev/null
'

test_expect_success 'beyond loopback: refused without TLS, served with it' '
	cd e &&
	cp base.yaml .baton/config.yaml &&
	serve_fails --listen 0.0.0.0:0 &&
	test_grep "0.0.0.0:0 is reachable beyond this machine.*server.tls.*server.insecure" err &&
	serve_fails --listen "[::]:0" &&
	{ cat base.yaml; echo "server: {tls: {cert: tls/a.crt, key: tls/a.key}}"; } >.baton/config.yaml &&
	chmod 600 tls/a.key &&
	rm -f .baton/http.url &&
	bg_start "$TRASH_DIRECTORY/serve-any" "$BATON" serve --workers 1 --listen 0.0.0.0:0 &&
	wait_for "test -s .baton/http.url" 20 &&
	test_grep "beyond this machine (TLS)" ../serve-any.out &&
	url=$(sed "s|/$||" .baton/http.url) &&
	curl -s --cacert tls/a.crt -o /dev/null -w "%{http_code}" \
		-H "Authorization: Bearer $(cat .baton/token)" "$url/api/v1/health" >status &&
	test "$(cat status)" = 200 &&
	kill "$(cat ../serve-any.pid)" && bg_wait ../serve-any >/dev/null
'

test_done
