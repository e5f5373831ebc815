// libcurl (Debian: libcurl4-openssl-dev): every outbound transfer runs on its multi-socket interface on
// netlifed's libevent loop. curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which
// Swift cannot call: these inline functions give each argument type its own name.
#include <curl/curl.h>

static inline CURLcode nl_easy_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode nl_easy_offset(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode nl_easy_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}
/// libcurl copies a string option: `value` need not outlive the call.
static inline CURLcode nl_easy_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}
/// libcurl copies the blob (CURL_BLOB_COPY): `data` need not outlive the call.
static inline CURLcode nl_easy_blob(CURL *easy, CURLoption option, const void *data, size_t length) {
    struct curl_blob blob = { (void *)data, length, CURL_BLOB_COPY };
    return curl_easy_setopt(easy, option, &blob);
}
static inline CURLcode nl_easy_list(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}

typedef size_t (*nl_data_callback)(char *data, size_t size, size_t count, void *context);
typedef curl_socket_t (*nl_open_socket_callback)(void *context, curlsocktype purpose, struct curl_sockaddr *address);
typedef int (*nl_close_socket_callback)(void *context, curl_socket_t socket);
typedef int (*nl_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *context, void *socketContext);
typedef int (*nl_timer_callback)(CURLM *multi, long milliseconds, void *context);
typedef int (*nl_progress_callback)(void *context, curl_off_t downloadTotal, curl_off_t downloaded,
                                    curl_off_t uploadTotal, curl_off_t uploaded);

static inline CURLcode nl_easy_data_callback(CURL *easy, CURLoption option, nl_data_callback callback) {
    return curl_easy_setopt(easy, option, callback);
}
static inline CURLcode nl_easy_open_socket_callback(CURL *easy, nl_open_socket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, callback);
}
static inline CURLcode nl_easy_close_socket_callback(CURL *easy, nl_close_socket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, callback);
}

static inline CURLcode nl_easy_progress_callback(CURL *easy, nl_progress_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, callback);
}

static inline CURLMcode nl_multi_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURLMcode nl_multi_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURLMcode nl_multi_socket_callback(CURLM *multi, nl_socket_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
}
static inline CURLMcode nl_multi_timer_callback(CURLM *multi, nl_timer_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
}

static inline CURLcode nl_info_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLcode nl_info_offset(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLcode nl_info_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLcode nl_info_string(CURL *easy, CURLINFO info, char **value) {
    return curl_easy_getinfo(easy, info, value);
}

/// The easy handle and result of a finished transfer's message (a union member Swift cannot reach).
static inline CURLcode nl_message_result(CURLMsg *message) {
    return message->data.result;
}
