#ifndef KEEPTRACK_CLIBYAML_SHIM_H
#define KEEPTRACK_CLIBYAML_SHIM_H
#include <yaml.h>
#endif
