// Copyright 2026 The kvstore Authors.

#include "common/auth/credentials.h"

#include <string>

#include "gtest/gtest.h"

namespace kvstore {
namespace auth {
namespace {

constexpr char kData[] = "data-token-0123456789";
constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kPeer[] = "peer-secret-0123456789";

Identities MustBuild(const Credentials& c) {
  absl::StatusOr<Identities> ids = Identities::Build(c);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return *std::move(ids);
}

TEST(CredentialsTest, EachSecretNamesItsOwnPrincipal) {
  Credentials c;
  c.data_token = kData;
  c.admin_token = kAdmin;
  c.peer_secret = kPeer;
  c.users.push_back(User{"reporting", Role::kRead, "reporting-secret-0123"});
  Identities ids = MustBuild(c);
  EXPECT_FALSE(ids.open());
  EXPECT_EQ(ids.BySecret(kData)->role, Role::kWrite);
  EXPECT_EQ(ids.BySecret(kData)->name, "default");
  EXPECT_EQ(ids.BySecret(kAdmin)->role, Role::kAdmin);
  EXPECT_EQ(ids.BySecret(kPeer)->role, Role::kPeer);
  EXPECT_EQ(ids.BySecret("reporting-secret-0123")->role, Role::kRead);
  EXPECT_FALSE(ids.BySecret("not-a-secret-0123456789").has_value());
  EXPECT_FALSE(ids.Anonymous().has_value());
  // RESP users: by name and password; the peers are no user.
  EXPECT_EQ(ids.ByUser("reporting", "reporting-secret-0123")->role, Role::kRead);
  EXPECT_FALSE(ids.ByUser("reporting", kData).has_value());
  EXPECT_FALSE(ids.ByUser("cluster-peer", kPeer).has_value());
  EXPECT_FALSE(ids.ByUser("nobody", kData).has_value());
}

TEST(CredentialsTest, NoClientCredentialIsOpenButNeverAPeer) {
  Credentials c;
  c.peer_secret = kPeer;
  Identities ids = MustBuild(c);
  EXPECT_TRUE(ids.open());
  EXPECT_EQ(ids.Anonymous()->role, Role::kAdmin);
  EXPECT_EQ(ids.BySecret(kPeer)->role, Role::kPeer);
}

TEST(CredentialsTest, RefusesSharedSecretsAndBadUsers) {
  Credentials same;
  same.data_token = kData;
  same.peer_secret = kData;
  EXPECT_FALSE(Identities::Build(same).ok());
  Credentials twice;
  twice.data_token = kData;
  twice.admin_token = kData;
  EXPECT_FALSE(Identities::Build(twice).ok());
  Credentials dup;
  dup.data_token = kData;
  dup.users.push_back(User{"default", Role::kRead, "another-secret-012345"});
  EXPECT_FALSE(Identities::Build(dup).ok());
  Credentials short_secret;
  short_secret.users.push_back(User{"u", Role::kRead, "short"});
  EXPECT_FALSE(Identities::Build(short_secret).ok());
  Credentials bad_name;
  bad_name.users.push_back(User{"a b", Role::kRead, "another-secret-012345"});
  EXPECT_FALSE(Identities::Build(bad_name).ok());
}

TEST(CredentialsTest, ParsesAUsersFile) {
  absl::StatusOr<std::vector<User>> users = ParseUsers(
      "# name role secret\n"
      "reader read reader-secret-0123456\n"
      "\n"
      "ops\tadmin ops-secret-0123456789   # the on-call\n");
  ASSERT_TRUE(users.ok()) << users.status();
  ASSERT_EQ(users->size(), 2u);
  EXPECT_EQ((*users)[0].name, "reader");
  EXPECT_EQ((*users)[0].role, Role::kRead);
  EXPECT_EQ((*users)[1].role, Role::kAdmin);
  EXPECT_EQ((*users)[1].secret, "ops-secret-0123456789");
  absl::StatusOr<std::vector<User>> peer = ParseUsers("x peer some-secret-0123456789\n");
  EXPECT_FALSE(peer.ok());
  EXPECT_NE(peer.status().message().find("line 1"), std::string::npos);
  EXPECT_FALSE(ParseUsers("x read\n").ok());
}

}  // namespace
}  // namespace auth
}  // namespace kvstore
