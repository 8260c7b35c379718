#include "common/net_address.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(NetAddress, JoinHostPortBracketsIpv6Once) {
  EXPECT_EQ(JoinHostPort("10.0.0.5", 29500), "10.0.0.5:29500");
  EXPECT_EQ(JoinHostPort("fd77::13", 29500), "[fd77::13]:29500");
  EXPECT_EQ(JoinHostPort("[fd77::13]", 29500), "[fd77::13]:29500");
  EXPECT_EQ(JoinHostPort("node-1", 7), "node-1:7");
}

TEST(NetAddress, HostOfHostPort) {
  EXPECT_EQ(HostOfHostPort("[::1]:7000"), "::1");
  EXPECT_EQ(HostOfHostPort("10.0.0.5:1"), "10.0.0.5");
  EXPECT_EQ(HostOfHostPort("nocolon"), "");
}

TEST(NetAddress, LoopbackLiterals) {
  for (const char* h : {"127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost",
                        "LOCALHOST", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"10.77.0.11", "fd77::11", "[fd77::11]", "node1", "",
                        "::ffff:10.0.0.1", "128.0.0.1"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

TEST(NetAddress, Wildcards) {
  EXPECT_TRUE(IsWildcardHost("0.0.0.0"));
  EXPECT_TRUE(IsWildcardHost("[::]"));
  EXPECT_TRUE(IsWildcardHost(""));
  EXPECT_FALSE(IsWildcardHost("10.0.0.1"));
}

TEST(NetAddress, LocalAddressTowardLoopbackIsLoopback) {
  absl::StatusOr<std::string> a = LocalAddressToward("127.0.0.1:29400");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "127.0.0.1");
  absl::StatusOr<std::string> b = LocalAddressToward("[::1]:29400");
  if (b.ok()) {  // hosts without IPv6 loopback skip it
    EXPECT_EQ(*b, "::1");
  }
}

TEST(NetAddress, LocalAddressTowardUnresolvableNamesIt) {
  absl::StatusOr<std::string> a =
      LocalAddressToward("no-such-host.invalid:29400");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("no-such-host.invalid:29400"),
            std::string::npos)
      << a.status();
}

TEST(NetAddress, DefaultAdvertisedAddress) {
  // A loopback literal stays loopback: everyone is on this machine.
  absl::StatusOr<std::string> a = DefaultAdvertisedAddress("127.0.0.1:29400");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "127.0.0.1");
  // "localhost" names loopback on every machine alike.
  absl::StatusOr<std::string> b = DefaultAdvertisedAddress("localhost:29400");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(IsLoopbackHost(*b)) << *b;
  // This machine's own name, where it leads to loopback (Debian maps it to
  // 127.0.1.1) and a default route exists: the default route's address.
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  const std::string own = std::string(name) + ":29400";
  absl::StatusOr<std::string> here = LocalAddressToward(own);
  absl::StatusOr<std::string> routed = LocalAddressToward("192.0.2.1:9");
  if (!here.ok() || !IsLoopbackHost(*here) || !routed.ok()) {
    GTEST_SKIP() << "the host name " << name
                 << " does not lead to loopback here, or there is no "
                    "default route";
  }
  absl::StatusOr<std::string> c = DefaultAdvertisedAddress(own);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, *routed);
  EXPECT_FALSE(IsLoopbackHost(*c)) << *c;
}

TEST(NetAddress, HostOfGrpcPeer) {
  EXPECT_EQ(HostOfGrpcPeer("ipv4:10.77.0.11:41234"), "10.77.0.11");
  EXPECT_EQ(HostOfGrpcPeer("ipv6:[fd77::11]:41234"), "fd77::11");
  EXPECT_EQ(HostOfGrpcPeer("ipv6:%5B::1%5D:41234"), "::1");
  EXPECT_EQ(HostOfGrpcPeer("unix:/tmp/sock"), "");
}

}  // namespace
}  // namespace cohort
