# shellcheck shell=bash
# PostgreSQL helpers shared by scripts/test, scripts/pg-throwaway, scripts/bench and
# scripts/quickstart. Source it; it defines functions only and changes no options.
#
# What it owns: finding the PostgreSQL binaries, deciding whether a server is
# reachable, and starting/stopping a private throwaway cluster. It never
# touches the system cluster (it only connects to it).
#
# PostgreSQL refuses to run as root. When this runs as root, initdb/pg_ctl
# run as the unprivileged `postgres` system user (created by Debian's
# postgresql package) and the cluster's temp dir is owned by that user.
#
# Knobs (environment):
#   SCHEDULER_PG_BINDIR   directory holding initdb/pg_ctl/postgres (optional; when set, the
#                         only place looked)
#   SCHEDULER_PG_INSTALL  `never`: do not apt-get install a missing server (default: auto,
#                         i.e. install when root on Debian/Ubuntu)
#   SCHEDULER_PG_USER     system user to run the server as when root
#                         (default: postgres)

# pg_log MESSAGE... : progress on stderr, so stdout stays machine-readable.
pg_log() {
    printf '[pg] %s\n' "$*" >&2
}

# pg_die MESSAGE... : print an error and fail (returns 1 when sourced from a
# function caller that handles it; scripts run with `set -e` stop here).
pg_die() {
    printf '[pg] error: %s\n' "$*" >&2
    return 1
}

# pg_redact_url URL : the URL with any password replaced by ***.
pg_redact_url() {
    printf '%s\n' "$1" | sed -E \
        -e 's#(://[^:/@?]*):[^@/?]*@#\1:***@#' \
        -e 's#([?&]password=)[^&]*#\1***#g'
}

# pg_server_bindir : print the directory holding initdb, pg_ctl and postgres,
# or fail with install instructions.
pg_server_bindir() {
    local candidates=() d
    # A directory the user names is the only place looked: a wrong one is reported, not papered
    # over by another installation.
    if [[ -n "${SCHEDULER_PG_BINDIR:-}" ]]; then
        d="$SCHEDULER_PG_BINDIR"
        if [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
        pg_die "SCHEDULER_PG_BINDIR=$d does not hold the PostgreSQL server binaries" \
            "(initdb, pg_ctl, postgres). $(pg_install_hint)"
        return 1
    fi
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null || true)
        [[ -n "$d" ]] && candidates+=("$d")
    fi
    # Debian/Ubuntu layout, highest major version first.
    while IFS= read -r d; do
        [[ -n "$d" ]] && candidates+=("$d")
    done < <(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -t/ -k5,5 -rn)
    # RHEL-style and source-build layouts.
    while IFS= read -r d; do
        [[ -n "$d" ]] && candidates+=("$d")
    done < <(find /usr -maxdepth 2 -path '/usr/pgsql-*/bin' -type d 2>/dev/null | sort -rV)
    candidates+=(/usr/local/pgsql/bin)
    if command -v initdb >/dev/null 2>&1; then
        candidates+=("$(dirname "$(command -v initdb)")")
    fi
    for d in "${candidates[@]}"; do
        if [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
    done
    pg_die "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found." \
        "$(pg_install_hint) (or set SCHEDULER_PG_BINDIR to the directory holding them)"
}

# pg_install_hint : one sentence saying exactly what to install on this machine.
pg_install_hint() {
    local sudo=""
    [[ "$(id -u)" == 0 ]] || sudo="sudo "
    if command -v apt-get >/dev/null 2>&1; then
        printf "Install PostgreSQL's server with: %sapt-get install postgresql\n" "$sudo"
    elif command -v dnf >/dev/null 2>&1; then
        printf "Install PostgreSQL's server with: %sdnf install postgresql-server postgresql-contrib\n" "$sudo"
    elif command -v apk >/dev/null 2>&1; then
        printf "Install PostgreSQL's server with: %sapk add postgresql postgresql-contrib\n" "$sudo"
    elif command -v brew >/dev/null 2>&1; then
        printf "Install PostgreSQL's server with: brew install postgresql@16\n"
    else
        printf "Install PostgreSQL's server (with its contrib modules) from your distribution or postgresql.org\n"
    fi
}

# pg_can_install : true if pg_install_server may install the server here: root, Debian's
# package manager, and SCHEDULER_PG_INSTALL is not `never`.
pg_can_install() {
    [[ "${SCHEDULER_PG_INSTALL:-auto}" != never ]] &&
        [[ "$(id -u)" == 0 ]] &&
        command -v apt-get >/dev/null 2>&1
}

# pg_install_server : install Debian's `postgresql` package, non-interactively (no prompt, no
# stdin), when pg_can_install allows it; then true if the server binaries are found.
pg_install_server() {
    pg_can_install || return 1
    pg_log "PostgreSQL's server is not installed; installing it:" \
        "apt-get update && apt-get install -y postgresql"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql; } \
        </dev/null >&2; then
        pg_log "apt-get install postgresql failed (output above)"
        return 1
    fi
    pg_server_bindir >/dev/null
}

# pg_ensure_pgbouncer : PgBouncer for the pooler tests (tests/tests/it/pgbouncer.rs start their own,
# from Debian's `pgbouncer` package): true if present, else installed here when pg_can_install
# allows it (same rules as the server: root, apt-get, SCHEDULER_PG_INSTALL not `never`). When it
# stays missing, says how to install it; those tests then fail with the same advice.
pg_ensure_pgbouncer() {
    if command -v pgbouncer >/dev/null 2>&1 || [[ -x /usr/sbin/pgbouncer ]]; then
        return 0
    fi
    if ! pg_can_install; then
        pg_log "PgBouncer is not installed: the pooler tests will fail; install it with:" \
            "apt-get install pgbouncer"
        return 1
    fi
    pg_log "PgBouncer is not installed; installing it: apt-get update && apt-get install -y pgbouncer"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold pgbouncer; } \
        </dev/null >&2; then
        pg_log "apt-get install pgbouncer failed (output above)"
        return 1
    fi
}

# pg_psql : print the path of a psql client, or nothing.
pg_psql() {
    local d
    if command -v psql >/dev/null 2>&1; then
        command -v psql
        return 0
    fi
    d=$(pg_server_bindir 2>/dev/null) || return 0
    [[ -x "$d/psql" ]] && printf '%s\n' "$d/psql"
    return 0
}

# pg_query URL SQL : run SQL, print unaligned tuples-only output. Never
# prompts for a password; gives up connecting after 3 seconds.
pg_query() {
    local psql
    psql=$(pg_psql)
    [[ -n "$psql" ]] || return 1
    PGCONNECT_TIMEOUT=3 "$psql" "$1" -X -w -q -A -t -v ON_ERROR_STOP=1 -c "$2" </dev/null
}

# pg_reachable URL : true if a `select 1` succeeds at URL.
pg_reachable() {
    [[ "$(pg_query "$1" 'select 1' 2>/dev/null)" == 1 ]]
}

# pg_as_server_user CMD... : run CMD as the user the server must run as:
# the current user, or ${SCHEDULER_PG_USER:-postgres} when root.
pg_as_server_user() {
    if [[ "$(id -u)" != 0 ]]; then
        "$@"
        return
    fi
    local user="${SCHEDULER_PG_USER:-postgres}"
    if command -v runuser >/dev/null 2>&1; then
        runuser -u "$user" -- "$@"
    elif command -v setpriv >/dev/null 2>&1; then
        setpriv --reuid="$user" --regid="$user" --init-groups -- "$@"
    else
        pg_die "running as root needs runuser or setpriv (util-linux) to drop to '$user'"
    fi
}

# pg_check_server_user : fail clearly if we are root and there is no
# unprivileged user to run the server as.
pg_check_server_user() {
    [[ "$(id -u)" != 0 ]] && return 0
    local user="${SCHEDULER_PG_USER:-postgres}"
    if ! id -u "$user" >/dev/null 2>&1; then
        pg_die "running as root, and PostgreSQL refuses to run as root, but there is" \
            "no '$user' system user to run it as. Create one" \
            "(useradd --system --home-dir /var/lib/postgresql $user)," \
            "set SCHEDULER_PG_USER to another unprivileged user, or run as a non-root user."
        return 1
    fi
    if [[ "$(id -u "$user")" == 0 ]]; then
        pg_die "SCHEDULER_PG_USER='$user' is root; PostgreSQL refuses to run as root"
        return 1
    fi
}

# pg_free_port : print a TCP port on 127.0.0.1 that nothing listens on now.
# (Racy by nature; pg_throwaway_start retries on a bind failure.)
pg_free_port() {
    local port i
    for i in $(seq 1 50); do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 30000))
        # A successful connect means something is listening there.
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            printf '%s\n' "$port"
            return 0
        fi
        : "$i"
    done
    pg_die "could not find a free TCP port on 127.0.0.1"
}

# pg_throwaway_start [-c NAME=VALUE]... : initdb + start a private cluster in a
# new temp dir on a free 127.0.0.1 port, with fsync off and trust auth.
# Sets (in the caller's shell) PG_THROWAWAY_DIR, PG_THROWAWAY_PORT,
# PG_THROWAWAY_URL and PG_THROWAWAY_BINDIR. Stop it with pg_throwaway_stop.
# Extra settings are appended to postgresql.conf, e.g.
#   pg_throwaway_start -c shared_preload_libraries=pg_stat_statements
pg_throwaway_start() {
    local settings=() bindir dir data port attempt user name value line
    while (($#)); do
        case "$1" in
            -c)
                [[ $# -ge 2 ]] || { pg_die "-c needs NAME=VALUE"; return 1; }
                line="$2"
                shift 2
                ;;
            -c?*) line="${1#-c}"; shift ;;
            *) pg_die "pg_throwaway_start: unknown argument '$1' (expected -c NAME=VALUE)"; return 1 ;;
        esac
        [[ "$line" =~ ^[A-Za-z_][A-Za-z0-9_.]*= ]] || { pg_die "bad setting '$line' (expected NAME=VALUE)"; return 1; }
        settings+=("$line")
    done

    bindir=$(pg_server_bindir) || return 1
    pg_check_server_user || return 1

    # When root the server user must reach the dir, so stay under /tmp rather
    # than a TMPDIR that may sit under /root. Keep the path short: the unix
    # socket path is limited to ~107 bytes.
    local base="${TMPDIR:-/tmp}"
    [[ "$(id -u)" == 0 ]] && base=/tmp
    dir=$(mktemp -d "$base/scheduler-pg.XXXXXX") || { pg_die "mktemp failed in $base"; return 1; }
    chmod 700 "$dir"
    if [[ "$(id -u)" == 0 ]]; then
        user="${SCHEDULER_PG_USER:-postgres}"
        chown "$user:" "$dir"
    fi
    data="$dir/data"
    PG_THROWAWAY_DIR="$dir"
    PG_THROWAWAY_BINDIR="$bindir"

    if ! (cd "$dir" && pg_as_server_user "$bindir/initdb" -D "$data" -U postgres \
        --auth=trust --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1); then
        cat "$dir/initdb.log" >&2
        pg_die "initdb failed (log above)"
        return 1
    fi

    {
        echo "# scheduler throwaway cluster"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$dir'"
        echo "fsync = off"
        echo "synchronous_commit = off"
        echo "full_page_writes = off"
        echo "max_connections = 200"
        echo "log_min_messages = warning"
        for line in "${settings[@]}"; do
            name="${line%%=*}"
            value="${line#*=}"
            # postgresql.conf string literal: double any single quote.
            printf "%s = '%s'\n" "$name" "${value//\'/\'\'}"
        done
    } | pg_as_server_user tee -a "$data/postgresql.conf" >/dev/null

    for attempt in 1 2 3 4 5; do
        port=$(pg_free_port) || return 1
        printf "port = %s\n" "$port" | pg_as_server_user tee -a "$data/postgresql.conf" >/dev/null
        if (cd "$dir" && pg_as_server_user "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" \
            -w -t 60 start >/dev/null 2>&1); then
            PG_THROWAWAY_PORT="$port"
            PG_THROWAWAY_URL="postgres://postgres@127.0.0.1:$port/postgres"
            export PG_THROWAWAY_DIR PG_THROWAWAY_PORT PG_THROWAWAY_URL PG_THROWAWAY_BINDIR
            pg_log "throwaway cluster up: $PG_THROWAWAY_URL (dir $dir, $("$bindir/postgres" --version))"
            return 0
        fi
        pg_log "start on port $port failed (attempt $attempt); server log tail:"
        tail -n 5 "$dir/server.log" >&2 2>/dev/null || true
    done
    pg_die "could not start the throwaway cluster; see $dir/server.log"
    return 1
}

# pg_throwaway_stop [DIR] : stop the throwaway cluster (immediate shutdown:
# it is throwaway) and remove its dir. Defaults to $PG_THROWAWAY_DIR.
# Safe to call twice, and on a half-started cluster.
pg_throwaway_stop() {
    local dir="${1:-${PG_THROWAWAY_DIR:-}}" bindir pid
    [[ -n "$dir" && -d "$dir" ]] || return 0
    case "$dir" in
        */scheduler-pg.*) ;;
        *) pg_die "refusing to remove '$dir': not a throwaway cluster dir"; return 1 ;;
    esac
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        bindir="${PG_THROWAWAY_BINDIR:-$(pg_server_bindir 2>/dev/null || true)}"
        if [[ -z "$bindir" ]] || ! (cd "$dir" && pg_as_server_user "$bindir/pg_ctl" -D "$dir/data" \
            -m immediate -w -t 30 stop >/dev/null 2>&1); then
            pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
            if [[ "$pid" =~ ^[0-9]+$ ]]; then
                kill -QUIT "$pid" 2>/dev/null || true
                sleep 1
                kill -KILL "$pid" 2>/dev/null || true
            fi
        fi
    fi
    rm -rf "$dir"
    if [[ "$dir" == "${PG_THROWAWAY_DIR:-}" ]]; then
        pg_log "throwaway cluster stopped and removed"
        unset PG_THROWAWAY_DIR PG_THROWAWAY_PORT PG_THROWAWAY_URL
    fi
}

# pg_use_system_server : sets DATABASE_URL to the server on 127.0.0.1:5432
# (database `test` if it exists, else `scheduler_test`, created if missing).
pg_use_system_server() {
    local base="postgres://postgres@127.0.0.1:5432" db
    pg_reachable "$base/postgres" || return 1
    if [[ "$(pg_query "$base/postgres" "select 1 from pg_database where datname = 'test'")" == 1 ]]; then
        db="test"
    else
        db=scheduler_test
        if [[ "$(pg_query "$base/postgres" "select 1 from pg_database where datname = '$db'")" != 1 ]]; then
            # A concurrent run may win the race; re-check rather than fail.
            pg_query "$base/postgres" "create database $db" >/dev/null 2>&1 || true
        fi
        pg_reachable "$base/$db" || return 1
    fi
    DATABASE_URL="$base/$db"
}

# pg_ensure_server [-c NAME=VALUE]... : sets DATABASE_URL (and pg_source, a
# description) to a reachable PostgreSQL:
#   1. $DATABASE_URL, if set and reachable;
#   2. else the server on 127.0.0.1:5432 (pg_use_system_server);
#   3. else a throwaway cluster (pg_throwaway_start with the given settings);
#      the caller stops it with pg_throwaway_stop "$PG_THROWAWAY_DIR".
# SCHEDULER_TEST_FORCE_THROWAWAY=1 skips 1 and 2. With settings given, 1 and
# 2 are skipped too: only a private cluster can be started with them.
pg_ensure_server() {
    pg_source=""
    if [[ "${SCHEDULER_TEST_FORCE_THROWAWAY:-}" == 1 ]]; then
        pg_log "SCHEDULER_TEST_FORCE_THROWAWAY=1: skipping server detection"
    elif (($# > 0)); then
        pg_log "server settings requested ($*): using a private cluster"
    else
        if [[ -n "${DATABASE_URL:-}" ]]; then
            if [[ -z "$(pg_psql)" ]]; then
                pg_log "no psql client to check DATABASE_URL; using it as given"
                pg_source="DATABASE_URL (unchecked)"
            elif pg_reachable "$DATABASE_URL"; then
                pg_source="DATABASE_URL"
            else
                pg_log "warning: DATABASE_URL=$(pg_redact_url "$DATABASE_URL") is not reachable; looking for another server"
                unset DATABASE_URL
            fi
        fi
        if [[ -z "$pg_source" ]] && pg_use_system_server; then
            pg_source="running server on 127.0.0.1:5432"
        fi
    fi
    if [[ -z "$pg_source" ]]; then
        pg_log "no usable PostgreSQL yet; starting a throwaway cluster"
        pg_throwaway_start "$@" || return 1
        DATABASE_URL="$PG_THROWAWAY_URL"
        pg_source="throwaway cluster in $PG_THROWAWAY_DIR"
    fi
    export DATABASE_URL
}
