#ifndef MODELC_CCURL_H
#define MODELC_CCURL_H
/* libcurl, opened with dlopen on the first transfer rather than linked:
   commands that fetch nothing do not load libcurl and the ~25 libraries it
   needs (TLS, Kerberos, LDAP, …). Nothing here needs libcurl's headers: the
   types and the values modelc uses are declared below from libcurl's stable
   ABI (soname libcurl.so.4; option and error numbers never change).

   When libcurl cannot be loaded, modelc_curl_global_init_default returns
   CURLE_FAILED_INIT and modelc_curl_easy_strerror says why; every other
   function fails (NULL or an error code) instead of crashing. */
#include <stddef.h>

typedef void CURL;
typedef struct Curl_URL CURLU;

struct curl_slist {
    char *data;
    struct curl_slist *next;
};

typedef size_t (*curl_write_callback)(char *buffer, size_t size, size_t nitems, void *outstream);

typedef enum {
    CURLE_OK = 0,
    CURLE_FAILED_INIT = 2,
    CURLE_URL_MALFORMAT = 3,
    CURLE_COULDNT_RESOLVE_HOST = 6,
    CURLE_COULDNT_CONNECT = 7,
    CURLE_HTTP2 = 16,
    CURLE_PARTIAL_FILE = 18,
    CURLE_OPERATION_TIMEDOUT = 28,
    CURLE_SSL_CONNECT_ERROR = 35,
    CURLE_GOT_NOTHING = 52,
    CURLE_SEND_ERROR = 55,
    CURLE_RECV_ERROR = 56,
    CURLE_HTTP2_STREAM = 92
} CURLcode;

/* Option numbers: type base (long 0, pointer 10000, function 20000) + index. */
typedef enum {
    CURLOPT_LOW_SPEED_LIMIT = 19,
    CURLOPT_LOW_SPEED_TIME = 20,
    CURLOPT_FAILONERROR = 45,
    CURLOPT_POST = 47,
    CURLOPT_FOLLOWLOCATION = 52,
    CURLOPT_POSTFIELDSIZE = 60,
    CURLOPT_HTTP_VERSION = 84,
    CURLOPT_BUFFERSIZE = 98,
    CURLOPT_NOSIGNAL = 99,
    CURLOPT_TIMEOUT_MS = 155,
    CURLOPT_CONNECTTIMEOUT_MS = 156,
    CURLOPT_WRITEDATA = 10001,
    CURLOPT_URL = 10002,
    CURLOPT_RANGE = 10007,
    CURLOPT_POSTFIELDS = 10015,
    CURLOPT_USERAGENT = 10018,
    CURLOPT_HTTPHEADER = 10023,
    CURLOPT_HEADERDATA = 10029,
    CURLOPT_CAINFO = 10065,
    CURLOPT_PROTOCOLS_STR = 10318,
    CURLOPT_WRITEFUNCTION = 20011,
    CURLOPT_HEADERFUNCTION = 20079
} CURLoption;

/* Info numbers: type base (string 0x100000, long 0x200000) + index. */
typedef enum {
    CURLINFO_REDIRECT_URL = 0x100000 + 31,
    CURLINFO_RESPONSE_CODE = 0x200000 + 2
} CURLINFO;

enum { CURL_HTTP_VERSION_2TLS = 4 };

typedef enum { CURLUE_OK = 0 } CURLUcode;
typedef enum { CURLUPART_URL = 0, CURLUPART_SCHEME = 1, CURLUPART_HOST = 5, CURLUPART_PORT = 6 } CURLUPart;
#define CURLU_DEFAULT_PORT (1U << 0)

/* curl_global_init(CURL_GLOBAL_DEFAULT) after opening libcurl.so.4, once per
   process (thread-safe); CURLE_FAILED_INIT when it cannot be opened. */
CURLcode modelc_curl_global_init_default(void);
/* libcurl's text for `code`; when libcurl could not be loaded, why not. */
const char *modelc_curl_easy_strerror(CURLcode code);

CURL *modelc_curl_easy_init(void);
void modelc_curl_easy_cleanup(CURL *handle);
CURLcode modelc_curl_easy_perform(CURL *handle);

/* curl_easy_setopt and curl_easy_getinfo are variadic; Swift cannot call them.
   These wrappers fix the argument type per call. */
CURLcode modelc_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode modelc_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode modelc_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode modelc_curl_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback value);
CURLcode modelc_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode modelc_curl_getinfo_string(CURL *handle, CURLINFO info, char **value);

struct curl_slist *modelc_curl_slist_append(struct curl_slist *list, const char *line);
void modelc_curl_slist_free_all(struct curl_slist *list);

CURLU *modelc_curl_url(void);
void modelc_curl_url_cleanup(CURLU *url);
CURLUcode modelc_curl_url_set(CURLU *url, CURLUPart part, const char *content, unsigned int flags);
CURLUcode modelc_curl_url_get(CURLU *url, CURLUPart part, char **content, unsigned int flags);
void modelc_curl_free(void *memory);
#endif
