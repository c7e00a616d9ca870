// libcurl from Debian's libcurl4-openssl-dev. curl_easy_setopt, curl_easy_getinfo and
// curl_multi_setopt are variadic, which Swift cannot call: typed wrappers go here, one per
// argument type, so the Swift side never passes a value of the wrong width to a varargs call.
#ifndef BACKUP_CCURL_SHIM_H
#define BACKUP_CCURL_SHIM_H
#include <curl/curl.h>

static inline CURLcode backup_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode backup_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// Strings are copied by libcurl (CURLOPT_URL, CURLOPT_USERNAME, ...), so the caller's
/// buffer may go away after the call.
static inline CURLcode backup_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode backup_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode backup_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

typedef size_t (*backup_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*backup_curl_seek_callback)(void *userdata, curl_off_t offset, int origin);
typedef int (*backup_curl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                             curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode backup_curl_setopt_data_callback(CURL *handle, CURLoption option,
                                                        backup_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode backup_curl_setopt_seek_callback(CURL *handle, backup_curl_seek_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, callback);
}

static inline CURLcode backup_curl_setopt_xferinfo_callback(CURL *handle, backup_curl_xferinfo_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

static inline CURLcode backup_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode backup_curl_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode backup_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/// The easy handle and result of a CURLMSG_DONE message; the result sits in a union.
static inline CURL *backup_curl_msg_handle(CURLMsg *message) { return message->easy_handle; }
static inline int backup_curl_msg_is_done(CURLMsg *message) { return message->msg == CURLMSG_DONE; }
static inline CURLcode backup_curl_msg_result(CURLMsg *message) { return message->data.result; }

/// Return values of callbacks, which are macros Swift does not import.
static inline size_t backup_curl_readfunc_abort(void) { return CURL_READFUNC_ABORT; }
static inline int backup_curl_seekfunc_ok(void) { return CURL_SEEKFUNC_OK; }
static inline int backup_curl_seekfunc_fail(void) { return CURL_SEEKFUNC_FAIL; }
static inline long backup_curl_auth_basic(void) { return (long)CURLAUTH_BASIC; }
static inline long backup_curl_auth_digest(void) { return (long)CURLAUTH_DIGEST; }
static inline long backup_curl_global_default(void) { return CURL_GLOBAL_DEFAULT; }
#endif
