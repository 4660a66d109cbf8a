#!/bin/sh
# Example --post-hook for restoring a hosting account, as restorepkg-style
# tooling does after the files are back:
#
#   restoresync restore --account alice \
#       --post-hook /usr/local/share/restoresync/post-restore.sh \
#       backup:/snapshots/daily.0/alice /home/alice
#
# It runs after every restore, also a failed one; RESTORE_STATUS says how it
# went (ok, partial, failed). On success it
#   1. gives the site's configuration file (CONFIG_FILE, relative to DST;
#      default public_html/wp-config.php) to the account's user and the web
#      server's group (WEB_GROUP, default www-data), mode 0640, so that PHP
#      can read it and other accounts cannot;
#   2. reloads the web server (WEB_RELOAD, default "systemctl reload nginx").
# Its output goes to restoresync's stderr; a non-zero exit after a good
# restore makes restoresync exit 26.
set -eu

config_file=${CONFIG_FILE:-public_html/wp-config.php}
web_group=${WEB_GROUP:-www-data}
web_reload=${WEB_RELOAD:-systemctl reload nginx}

echo "post-restore: ${RESTORE_ACCOUNT:-(no account)}: $RESTORE_STATUS," \
	"$RESTORE_FILES files, $RESTORE_BYTES bytes in ${RESTORE_SECONDS}s ($RESTORE_METHOD, $RESTORE_COMPRESSION)"

if [ "$RESTORE_STATUS" != ok ]; then
	echo "post-restore: not touching $RESTORE_DST: the restore is $RESTORE_STATUS (report: $RESTORE_REPORT)" >&2
	exit 0
fi

cfg="${RESTORE_DST%/}/$config_file"
if [ -f "$cfg" ] && [ ! -L "$cfg" ]; then
	owner=${RESTORE_ACCOUNT:-$(stat -c %U "$RESTORE_DST")}
	chown -h "$owner:$web_group" "$cfg"
	chmod 0640 "$cfg"
	echo "post-restore: $cfg is now $owner:$web_group 0640"
fi

# Reload, not restart: open connections are served to the end.
sh -c "$web_reload"
echo "post-restore: reloaded the web server"
