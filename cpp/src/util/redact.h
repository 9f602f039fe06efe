// Credentials never reach a message: a source URI may carry them
// ("s3://KEY:SECRET@bucket/x", "?access_key=..&secret_key=..&session_token=..").
#pragma once

#include <string>

namespace shardfeed {

// `uri` with its user info and the values of secret-looking query options
// (keys, secrets, tokens, passwords, credentials, signatures) replaced by
// "***".  Plain paths come back unchanged.
std::string RedactUri(const std::string& uri);

// `message` with every secret that `uri` carries replaced by "***": for text
// built by others (Arrow's errors) that may quote the URI or its parts.
std::string RedactSecrets(std::string message, const std::string& uri);

}  // namespace shardfeed
