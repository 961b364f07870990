/* baton's version, for `baton version`, the API and User-Agent headers. */
#ifndef BATON_UTIL_VERSION_H
#define BATON_UTIL_VERSION_H

#ifndef BATON_VERSION
#define BATON_VERSION "0.5.0"
#endif

#endif
