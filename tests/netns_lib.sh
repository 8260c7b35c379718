# Several hosts on one machine, for the multi-host tests (sourced after
# lib.sh, never run): network namespaces joined by a bridge that lives in a
# namespace of its own (the "switch"), all made by the test and removed at
# exit, so no traffic leaves the namespaces the test created.
#
#   netns_setup N        hosts h0..h(N-1) at 10.77.0.10+i/24; the switch
#                        itself answers at 10.77.0.1 and forwards nothing
#   on HOST CMD...       runs CMD on HOST (h0, h1, ...); for a process in
#                        the background, `ip netns exec "$(netns_ns HOST)"`
#                        instead, so that $! is the process itself
#   netns_addr HOST      HOST's address
#   netns_cut HOST       silently drops everything to and from HOST (its
#                        port on the bridge is disabled; the link stays up)
#   netns_heal HOST      undoes netns_cut
#   netns_firewall HOST  drops HOST's IP packets (v4 and v6) in the switch, as
#                        a firewall between two networks would; ARP still
#                        passes. netns_cut also stops ARP, and after it
#                        heals a host re-resolves its peer only at the
#                        neighbour table's next probe (up to 1 s,
#                        retrans_time_ms), which would hide cohort's own
#                        recovery time. Returns 1 without ebtables.
#   netns_unfirewall HOST  undoes netns_firewall
# A test calls netns_require first: without the privilege to make
# namespaces it prints why and exits 0 (the test is skipped, not failed).
netns_prefix="coh$$"
netns_made=()

netns_cleanup() {
  local ns
  for ns in "${netns_made[@]}"; do ip netns del "$ns" 2>/dev/null; done
}

netns_require() {
  # Bazel's test environment leaves the administrator's folders off PATH.
  PATH="$PATH:/usr/sbin:/sbin"
  if ! command -v ip >/dev/null || ! command -v bridge >/dev/null; then
    echo "SKIP: iproute2 (ip, bridge) is not installed"
    exit 0
  fi
  if ! ip netns add "${netns_prefix}probe" 2>/dev/null; then
    echo "SKIP: cannot make network namespaces here (needs CAP_NET_ADMIN," \
         "e.g. root); the multi-host cases did not run"
    exit 0
  fi
  ip netns del "${netns_prefix}probe"
  trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; netns_cleanup' EXIT
}

netns_addr() { echo "10.77.0.$((10 + ${1#h}))"; }
netns_ns() { echo "${netns_prefix}$1"; }

on() {
  local host="$1"
  shift
  ip netns exec "${netns_prefix}$host" "$@"
}

netns_setup() {
  local n="$1" sw="${netns_prefix}sw" i ns
  ip netns add "$sw" && netns_made+=("$sw")
  ip -n "$sw" link set lo up
  # New namespaces inherit IPv4 forwarding from the host's (a container
  # engine turns it on); the switch must drop what it cannot deliver
  # silently, as a firewall would, not answer "network unreachable".
  ip netns exec "$sw" sysctl -qw net.ipv4.ip_forward=0
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" addr add 10.77.0.1/24 dev br0
  ip -n "$sw" link set br0 up
  for ((i = 0; i < n; i++)); do
    ns="${netns_prefix}h$i"
    ip netns add "$ns" && netns_made+=("$ns")
    ip link add "${netns_prefix}e$i" type veth peer name "${netns_prefix}p$i"
    ip link set "${netns_prefix}e$i" netns "$ns" name eth0
    ip link set "${netns_prefix}p$i" netns "$sw" name "p$i"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(netns_addr "h$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

# Hosts h0 .. h(N-1) on the taps t0 .. t(N-1) that bench/linkemu made in
# the switch namespace SW (emulated links instead of veth to a bridge), one
# address each on eth0.
netns_tap_hosts() {  # netns_tap_hosts SW N
  local sw=$1 n=$2 i ns
  for ((i = 0; i < n; i++)); do
    ns="${netns_prefix}h$i"
    ip netns add "$ns" && netns_made+=("$ns")
    ip -n "$sw" link set "t$i" netns "$ns" name eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(netns_addr "h$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

netns_cut() { bridge -n "${netns_prefix}sw" link set dev "p${1#h}" state 0; }
netns_heal() { bridge -n "${netns_prefix}sw" link set dev "p${1#h}" state 3; }

# One chain per host, so that the heal is one atomic flush.
netns_firewall() {
  command -v ebtables >/dev/null || return 1
  local sw="${netns_prefix}sw" chain="CUT_p${1#h}" port="p${1#h}"
  if ! ip netns exec "$sw" ebtables -L "$chain" >/dev/null 2>&1; then
    ip netns exec "$sw" ebtables -N "$chain" -P RETURN || return 1
    ip netns exec "$sw" ebtables -A FORWARD -i "$port" -j "$chain"
    ip netns exec "$sw" ebtables -A FORWARD -o "$port" -j "$chain"
  fi
  ip netns exec "$sw" ebtables -A "$chain" -p IPv4 -j DROP &&
    ip netns exec "$sw" ebtables -A "$chain" -p IPv6 -j DROP
}
netns_unfirewall() { ip netns exec "${netns_prefix}sw" ebtables -F "CUT_p${1#h}"; }
