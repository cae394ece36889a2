// libmosquitto, loaded when the first MQTT connection is made rather than when keeptrack starts.
//
// Linked as a needed library, libmosquitto brings OpenSSL's libssl and libcrypto into every
// keeptrack process, MQTT or not, and their relocations alone keep 1.7 MB resident (tools/bench-track.py
// --memory). So the library is opened with dlopen on first use, and each function MQTT calls goes
// through a pointer resolved then. <mosquitto.h> still gives the types and constants: building needs
// libmosquitto-dev, running MQTT needs libmosquitto1.
#ifndef KEEPTRACK_CMOSQUITTO_H
#define KEEPTRACK_CMOSQUITTO_H

#include <mosquitto.h>
#include <stddef.h>

/// Opens libmosquitto and resolves every function below, once per process (later calls return the
/// first outcome). Returns 0, or -1 with a message that names the library and what failed.
int keeptrack_mosquitto_load(char *message, size_t size);

// The libmosquitto functions MQTT uses, same signatures; call only after a successful load.
int keeptrack_mosquitto_lib_init(void);
struct mosquitto *keeptrack_mosquitto_new(const char *id, bool clean_session, void *obj);
void keeptrack_mosquitto_destroy(struct mosquitto *mosq);
int keeptrack_mosquitto_int_option(struct mosquitto *mosq, enum mosq_opt_t option, int value);
int keeptrack_mosquitto_reconnect_delay_set(struct mosquitto *mosq, unsigned int reconnect_delay,
                                            unsigned int reconnect_delay_max, bool reconnect_exponential_backoff);
int keeptrack_mosquitto_will_set(struct mosquitto *mosq, const char *topic, int payloadlen, const void *payload,
                                 int qos, bool retain);
int keeptrack_mosquitto_username_pw_set(struct mosquitto *mosq, const char *username, const char *password);
int keeptrack_mosquitto_tls_set(struct mosquitto *mosq, const char *cafile, const char *capath,
                                const char *certfile, const char *keyfile,
                                int (*pw_callback)(char *buf, int size, int rwflag, void *userdata));
void keeptrack_mosquitto_connect_callback_set(struct mosquitto *mosq,
                                              void (*on_connect)(struct mosquitto *, void *, int));
void keeptrack_mosquitto_disconnect_callback_set(struct mosquitto *mosq,
                                                 void (*on_disconnect)(struct mosquitto *, void *, int));
void keeptrack_mosquitto_publish_callback_set(struct mosquitto *mosq,
                                              void (*on_publish)(struct mosquitto *, void *, int));
void keeptrack_mosquitto_subscribe_callback_set(struct mosquitto *mosq,
                                                void (*on_subscribe)(struct mosquitto *, void *, int, int,
                                                                     const int *));
void keeptrack_mosquitto_message_callback_set(struct mosquitto *mosq,
                                              void (*on_message)(struct mosquitto *, void *,
                                                                 const struct mosquitto_message *));
int keeptrack_mosquitto_connect_async(struct mosquitto *mosq, const char *host, int port, int keepalive);
int keeptrack_mosquitto_loop_start(struct mosquitto *mosq);
int keeptrack_mosquitto_loop_stop(struct mosquitto *mosq, bool force);
int keeptrack_mosquitto_publish(struct mosquitto *mosq, int *mid, const char *topic, int payloadlen,
                                const void *payload, int qos, bool retain);
int keeptrack_mosquitto_subscribe(struct mosquitto *mosq, int *mid, const char *sub, int qos);
int keeptrack_mosquitto_disconnect(struct mosquitto *mosq);
const char *keeptrack_mosquitto_strerror(int mosq_errno);
const char *keeptrack_mosquitto_connack_string(int connack_code);

#endif
