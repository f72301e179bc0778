// Compiled by the layers.* tests with one layer's include view: the
// transport layer may not see comm/ (the build refuses), the algorithm
// layer may.
#include "comm/comm.h"
