// libmosquitto through dlopen: see include/CMosquitto.h.
#include "CMosquitto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

// X(return type, name, parameters, arguments, `return` or nothing): every function the header declares.
#define KEEPTRACK_MOSQUITTO_FUNCTIONS(X)                                                               \
    X(int, lib_init, (void), (), return)                                                                       \
    X(struct mosquitto *, new, (const char *id, bool clean, void *obj), (id, clean, obj), return)             \
    X(void, destroy, (struct mosquitto *m), (m), )                                                       \
    X(int, int_option, (struct mosquitto *m, enum mosq_opt_t o, int v), (m, o, v), return)                    \
    X(int, reconnect_delay_set, (struct mosquitto *m, unsigned int d, unsigned int dm, bool e),       \
      (m, d, dm, e), return)                                                                                   \
    X(int, will_set, (struct mosquitto *m, const char *t, int n, const void *p, int q, bool r),        \
      (m, t, n, p, q, r), return)                                                                              \
    X(int, username_pw_set, (struct mosquitto *m, const char *u, const char *p), (m, u, p), return)           \
    X(int, tls_set,                                                                                    \
      (struct mosquitto *m, const char *ca, const char *cap, const char *cert, const char *key,       \
       int (*pw)(char *, int, int, void *)),                                                           \
      (m, ca, cap, cert, key, pw), return)                                                                     \
    X(void, connect_callback_set, (struct mosquitto *m, void (*f)(struct mosquitto *, void *, int)),  \
      (m, f), )                                                                                          \
    X(void, disconnect_callback_set,                                                                   \
      (struct mosquitto *m, void (*f)(struct mosquitto *, void *, int)), (m, f), )                      \
    X(void, publish_callback_set, (struct mosquitto *m, void (*f)(struct mosquitto *, void *, int)),  \
      (m, f), )                                                                                          \
    X(void, subscribe_callback_set,                                                                    \
      (struct mosquitto *m, void (*f)(struct mosquitto *, void *, int, int, const int *)), (m, f), )    \
    X(void, message_callback_set,                                                                      \
      (struct mosquitto *m, void (*f)(struct mosquitto *, void *, const struct mosquitto_message *)), \
      (m, f), )                                                                                          \
    X(int, connect_async, (struct mosquitto *m, const char *h, int p, int k), (m, h, p, k), return)           \
    X(int, loop_start, (struct mosquitto *m), (m), return)                                                     \
    X(int, loop_stop, (struct mosquitto *m, bool f), (m, f), return)                                           \
    X(int, publish, (struct mosquitto *m, int *mid, const char *t, int n, const void *p, int q, bool r), \
      (m, mid, t, n, p, q, r), return)                                                                         \
    X(int, subscribe, (struct mosquitto *m, int *mid, const char *s, int q), (m, mid, s, q), return)          \
    X(int, disconnect, (struct mosquitto *m), (m), return)                                                     \
    X(const char *, strerror, (int e), (e), return)                                                            \
    X(const char *, connack_string, (int c), (c), return)

// The soname Debian's libmosquitto1 ships (the ABI the header describes).
static const char library_name[] = "libmosquitto.so.1";

#define POINTER(ret, name, params, args, ...) static ret(*p_##name) params;
KEEPTRACK_MOSQUITTO_FUNCTIONS(POINTER)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512] = "not loaded";  // empty once loaded

static void load(void) {
    void *library = dlopen(library_name, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *why = dlerror();
        snprintf(failure, sizeof failure, "%s", why != NULL ? why : library_name);
        return;
    }
#define RESOLVE(ret, name, params, args, ...)                                                             \
    p_##name = (ret(*) params)dlsym(library, "mosquitto_" #name);                                    \
    if (p_##name == NULL) {                                                                          \
        snprintf(failure, sizeof failure, "%s has no mosquitto_%s", library_name, #name);            \
        return;                                                                                      \
    }
    KEEPTRACK_MOSQUITTO_FUNCTIONS(RESOLVE)
    failure[0] = '\0';
}

int keeptrack_mosquitto_load(char *message, size_t size) {
    pthread_once(&once, load);
    if (failure[0] == '\0') return 0;
    if (message != NULL && size > 0) snprintf(message, size, "%s", failure);
    return -1;
}

#define TRAMPOLINE(ret, name, params, args, return_) \
    ret keeptrack_mosquitto_##name params { return_ p_##name args; }
KEEPTRACK_MOSQUITTO_FUNCTIONS(TRAMPOLINE)
