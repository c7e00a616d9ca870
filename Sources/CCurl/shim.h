// libcurl from Debian's libcurl4-openssl-dev. curl_easy_setopt and curl_easy_getinfo are
// variadic, which Swift cannot call: typed wrappers go here.
#ifndef BACKUP_CCURL_SHIM_H
#define BACKUP_CCURL_SHIM_H
#include <curl/curl.h>
#endif
