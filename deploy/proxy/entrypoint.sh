#!/bin/sh
# Write nginx's configuration from PROXY_PORT and UPSTREAMS, then run nginx in the foreground (as www-data).
set -eu
servers=""
for upstream in $UPSTREAMS; do
    servers="$servers        server $upstream max_fails=1 fail_timeout=5s;\n"
done
sed -e "s/@PROXY_PORT@/$PROXY_PORT/" -e "s/@UPSTREAM_SERVERS@/$servers/" \
    /etc/nginx/calypso.conf.template >/tmp/nginx.conf
nginx -e stderr -t -q -c /tmp/nginx.conf
exec nginx -e stderr -c /tmp/nginx.conf -g 'daemon off;'
