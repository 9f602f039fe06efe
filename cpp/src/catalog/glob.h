// Glob patterns in the path of a remote source (internal to the catalog).
//
// A local glob is expanded in Python (glob.glob); an object store has no
// such call, so a URI whose path does not exist and has a pattern character
// is matched here against a listing of the folder above its first pattern
// component, with the rules of Python's glob(recursive=True) and of the local
// expansion: `*`, `?`, `[set]` and `[!set]` within a component, `**` for any
// number of components, names starting with "." matched only by a pattern
// component that starts with "." too, and a matched path with a component
// starting with "_" below the fixed part (Spark's `_temporary/`) left out
// unless the pattern names that component itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shardfeed {

// Whether `path` has a pattern character ('*', '?' or '[').
bool HasGlobMagic(std::string_view path);

// Whether the one-component `name` matches the one-component `pattern`.
bool MatchComponent(std::string_view pattern, std::string_view name);

// The components of `pattern` before the first one with a pattern character,
// joined by '/': the folder to list.
std::string GlobFixedPart(const std::string& pattern);

// How many components below its fixed part `pattern` can match: -1 when it has
// a "**" (any number).
int GlobDepth(const std::string& pattern);

// The paths `pattern` matches, given every file below its fixed part: those
// files it matches, and the folders above them (below the fixed part) it
// matches, sorted, each once, without those below another match (read with
// that folder).  Paths are '/'-separated, as `pattern` is.
std::vector<std::string> MatchGlob(const std::string& pattern,
                                   const std::vector<std::string>& files);

}  // namespace shardfeed
