#ifndef KEEPTRACK_CMOSQUITTO_SHIM_H
#define KEEPTRACK_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#endif
