#include "util/redact.h"

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

TEST(RedactUri, StripsUserInfo) {
  EXPECT_EQ(RedactUri("s3://AKIAKEY:s3cr3t@bucket/x.parquet"), "s3://***@bucket/x.parquet");
  EXPECT_EQ(RedactUri("s3://AKIAKEY:s3cr3t@bucket"), "s3://***@bucket");
  // A secret holding an '@' is stripped whole.
  EXPECT_EQ(RedactUri("s3://k:a@b@bucket/x"), "s3://***@bucket/x");
}

TEST(RedactUri, MasksSecretQueryOptions) {
  EXPECT_EQ(RedactUri("s3://bucket/x?region=eu&access_key=AK&secret_key=SK&session_token=T"),
            "s3://bucket/x?region=eu&access_key=***&secret_key=***&session_token=***");
  EXPECT_EQ(RedactUri("s3://bucket/x?endpoint_override=localhost%3A9000&scheme=http"),
            "s3://bucket/x?endpoint_override=localhost%3A9000&scheme=http");
}

TEST(RedactUri, LeavesPathsAlone) {
  EXPECT_EQ(RedactUri("/data/a@b/x.parquet"), "/data/a@b/x.parquet");
  EXPECT_EQ(RedactUri("s3://bucket/a@b/x.parquet"), "s3://bucket/a@b/x.parquet");
}

TEST(RedactSecrets, MasksEveryCopyInAMessage) {
  const std::string uri = "s3://AK:SK-long@bucket/x?secret_key=QS&session_token=TOK";
  EXPECT_EQ(RedactSecrets("source '" + uri + "' does not exist; key AK, token TOK", uri),
            "source 's3://***@bucket/x?secret_key=***&session_token=***' does not exist; key "
            "***, token ***");
  EXPECT_EQ(RedactSecrets("nothing here", "/local/path"), "nothing here");
}

}  // namespace
}  // namespace shardfeed
