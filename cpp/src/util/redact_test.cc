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

TEST(RedactUri, KeepsNamesThatAreNotCredentials) {
  // Azure's container and GCS's anonymous user are names; a password is not.
  EXPECT_EQ(RedactUri("abfs://c@acct.dfs.core.windows.net/x"),
            "abfs://c@acct.dfs.core.windows.net/x");
  EXPECT_EQ(RedactUri("abfss://data:pw@acct.dfs.core.windows.net/x"),
            "abfss://data:***@acct.dfs.core.windows.net/x");
  EXPECT_EQ(RedactUri("gs://anonymous@bucket/x"), "gs://anonymous@bucket/x");
  EXPECT_EQ(RedactUri("S3://key:pw@bucket/x"), "S3://***@bucket/x");
}

TEST(RedactSecrets, LeavesWordsWholeAroundShortValues) {
  // The container "c" masked every c of Arrow's message: "sour***e", "Che***k".
  const std::string azure = "abfs://c@a.dfs.core.windows.net/x";
  const std::string said = "source '" + azure + "': Check for Hierarchical Namespace support";
  EXPECT_EQ(RedactSecrets(said, azure), said);
  const std::string s3 = "s3://ab:cd@bucket/x";
  EXPECT_EQ(RedactSecrets("about 'ab' and cdrom: ab, cd.", s3), "about '***' and cdrom: ***, ***.");
  // A long secret goes wherever it is, inside a word too.
  const std::string long_secret = "s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/x";
  EXPECT_EQ(RedactSecrets("xAKIAEXAMPLEx wJalrXUtnFEMI/", long_secret), "x***x ***/");
  EXPECT_EQ(RedactSecrets("pw pw2 (pw)", "abfs://c:pw@a.dfs.core.windows.net/"), "*** pw2 (***)");
}

}  // namespace
}  // namespace shardfeed
