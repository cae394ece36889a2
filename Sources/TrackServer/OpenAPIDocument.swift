// Generated from docs/openapi.yaml by OpenAPITests: do not edit. After changing the YAML, run
// `KEEPTRACK_WRITE_OPENAPI=1 swift test --filter OpenAPITests` and commit both (docs/http-api.md).

/// The HTTP API's OpenAPI document, docs/openapi.yaml as JSON: what `GET /openapi.json` answers.
enum OpenAPIDocument {
    static let json = ##"""
        {
          "openapi": "3.1.0",
          "info": {
            "title": "keeptrack serve",
            "version": "1",
            "summary": "Ingest, queries, live stream and map of keeptrack's endpoint.",
            "description": "`keeptrack serve` stores what trackers send (our JSON batch, Traccar's OsmAnd, O\##
        wnTracks over HTTP\nand MQTT, Overland) and answers queries over it (trails, fleet positions, stops \##
        and trips, the\nOwnTracks Recorder's read API, a live stream, a map).\n\n**Credentials.** With neith\##
        er an admin token nor a device token (`keeptrack serve devices add`), every\nroute is open. Once one\##
         exists, every route but `/healthz`, `/metrics`, `/openapi.json` and the\nmap's static files needs o\##
        ne: the admin token or a device's, as `Authorization: Bearer TOKEN`,\nas the password of HTTP Basic \##
        (how the OwnTracks apps send it; the user is then the OwnTracks\nuser), or as `?token=TOKEN` (`?api_\##
        key=` for Dawarich's clients). A device token reads and\nwrites its own device only (403 for another\##
        ). OsmAnd's ingest (`/`) takes requests without a\ncredential for devices that have a token, as Trac\##
        car does.\n\n**Errors.** A refused request gets a status and, unless said otherwise, the JSON body\n\##
        `{\"error\":{\"message\":\"...\"}}` naming the problem (`records[3].lat: 95 is out of range\n[-90, 9\##
        0]`). Any request may also get, before its route: 413 (a `Content-Length` over\nthe server's body li\##
        mit (8 MiB by default), the connection then closed), 400 (a `Content-Length` that is not a length),\\##
        n503 with `Retry-After` (every connection busy, or too many large bodies at once).\n\n**CORS.** With\##
         allowed origins set, every route answers a preflight (`OPTIONS` with\n`Access-Control-Request-Metho\##
        d`) before authentication: 204, with the allowed methods and\nheaders for a listed origin.\n\n**HEAD\##
        ** answers as GET does, without the body, on every GET route but stops, trips and the\nRecorder API.\##
        \n"
          },
          "servers": [
            {
              "url": "http://127.0.0.1:5055",
              "description": "`keeptrack serve` with its default address and port."
            }
          ],
          "security": [
            {
              "bearer": []
            },
            {
              "basic": []
            },
            {
              "tokenQuery": []
            },
            {
              "apiKeyQuery": []
            }
          ],
          "tags": [
            {
              "name": "ingest",
              "description": "What trackers send."
            },
            {
              "name": "queries",
              "description": "Trails, devices, positions, stops and trips."
            },
            {
              "name": "live",
              "description": "The live stream and the map."
            },
            {
              "name": "recorder",
              "description": "The OwnTracks Recorder's read API (`/api/0/...`), for the OwnTracks Frontend (\##
        docs/owntracks-recorder-api.md)."
            },
            {
              "name": "operations",
              "description": "Health, metrics, faults, this document."
            }
          ],
          "x-keeptrack-preflight": {
            "summary": "CORS preflight (with allowed origins set), answered before authentication.",
            "x-keeptrack-only-with": "corsOrigins",
            "security": [],
            "parameters": [
              {
                "name": "Origin",
                "in": "header",
                "required": true,
                "schema": {
                  "type": "string"
                }
              },
              {
                "name": "Access-Control-Request-Method",
                "in": "header",
                "required": true,
                "schema": {
                  "type": "string"
                }
              }
            ],
            "responses": {
              "204": {
                "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEAD, P\##
        OST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
              }
            }
          },
          "paths": {
            "/v1/locations": {
              "post": {
                "tags": [
                  "ingest"
                ],
                "operationId": "postLocations",
                "summary": "Our JSON batch.",
                "description": "Records of one device; `id` (`device:seq`) makes storage idempotent: a recor\##
        d sent again is\ncounted in `duplicates`. The body may be gzip (`Content-Encoding: gzip`).\n",
                "requestBody": {
                  "required": true,
                  "content": {
                    "application/json": {
                      "schema": {
                        "$ref": "#/components/schemas/Batch"
                      }
                    }
                  }
                },
                "responses": {
                  "200": {
                    "description": "Stored (or already stored).",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Acceptance"
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  },
                  "408": {
                    "$ref": "#/components/responses/BodyTimeout"
                  },
                  "413": {
                    "$ref": "#/components/responses/TooLarge"
                  },
                  "503": {
                    "$ref": "#/components/responses/Busy"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/": {
              "get": {
                "tags": [
                  "ingest",
                  "live"
                ],
                "operationId": "getOsmAnd",
                "summary": "Traccar's OsmAnd protocol (query), or the map page for a browser.",
                "description": "OsmAnd's parameters in the query (`id` or `deviceid`, `lat`, `lon` or `locat\##
        ion=LAT,LON`,\n`timestamp` (Unix seconds or ISO 8601), `speed` (knots), `bearing`, `altitude`, `accu\##
        racy`,\n`valid`, others kept as attributes). A request that asks for HTML (`Accept: text/html`)\nwit\##
        hout `id`/`deviceid` gets the map page instead (`/map`).\n",
                "security": [
                  {},
                  {
                    "bearer": []
                  },
                  {
                    "basic": []
                  },
                  {
                    "tokenQuery": []
                  }
                ],
                "parameters": [
                  {
                    "name": "id",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "The device (or `deviceid`)."
                  },
                  {
                    "name": "deviceid",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "lat",
                    "in": "query",
                    "schema": {
                      "type": "number",
                      "minimum": -90,
                      "maximum": 90
                    }
                  },
                  {
                    "name": "lon",
                    "in": "query",
                    "schema": {
                      "type": "number",
                      "minimum": -180,
                      "maximum": 180
                    }
                  },
                  {
                    "name": "location",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "`LAT,LON` instead of `lat` and `lon`."
                  },
                  {
                    "name": "timestamp",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "Unix seconds or ISO 8601."
                  },
                  {
                    "name": "speed",
                    "in": "query",
                    "schema": {
                      "type": "number"
                    },
                    "description": "Knots."
                  },
                  {
                    "name": "bearing",
                    "in": "query",
                    "schema": {
                      "type": "number"
                    }
                  },
                  {
                    "name": "altitude",
                    "in": "query",
                    "schema": {
                      "type": "number"
                    }
                  },
                  {
                    "name": "accuracy",
                    "in": "query",
                    "schema": {
                      "type": "number"
                    }
                  }
                ],
                "responses": {
                  "200": {
                    "description": "Stored (an empty body), or the map page.",
                    "x-keeptrack-may-be-empty": true,
                    "content": {
                      "text/plain": {
                        "schema": {
                          "type": "string",
                          "maxLength": 0
                        }
                      },
                      "text/html": {
                        "schema": {
                          "type": "string"
                        }
                      }
                    }
                  },
                  "400": {
                    "description": "A parameter is wrong (the error body), or, without a credential, the dev\##
        ice has no\ntoken (Traccar's answer to an unknown device: an empty body).\n",
                    "x-keeptrack-may-be-empty": true,
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Error"
                        }
                      }
                    }
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  }
                }
              },
              "post": {
                "tags": [
                  "ingest"
                ],
                "operationId": "postOsmAnd",
                "summary": "Traccar's OsmAnd protocol (form body), or Traccar Client's JSON.",
                "description": "The query's parameters plus a form body's (`application/x-www-form-urlencode\##
        d`); or, with\n`Content-Type: application/json`, Traccar Client's JSON (`{\"device_id\":...,\"locati\##
        on\":\n{\"timestamp\":...,\"coords\":{\"latitude\":...,\"longitude\":...}}}`).\n",
                "security": [
                  {},
                  {
                    "bearer": []
                  },
                  {
                    "basic": []
                  },
                  {
                    "tokenQuery": []
                  }
                ],
                "requestBody": {
                  "content": {
                    "application/x-www-form-urlencoded": {
                      "schema": {
                        "type": "object",
                        "additionalProperties": {
                          "type": "string"
                        }
                      }
                    },
                    "application/json": {
                      "schema": {
                        "type": "object",
                        "required": [
                          "location"
                        ],
                        "properties": {
                          "device_id": {
                            "type": "string"
                          },
                          "location": {
                            "type": "object",
                            "required": [
                              "coords"
                            ],
                            "properties": {
                              "timestamp": {
                                "type": "string"
                              },
                              "coords": {
                                "type": "object",
                                "required": [
                                  "latitude",
                                  "longitude"
                                ],
                                "properties": {
                                  "latitude": {
                                    "type": "number"
                                  },
                                  "longitude": {
                                    "type": "number"
                                  },
                                  "altitude": {
                                    "type": "number"
                                  },
                                  "accuracy": {
                                    "type": "number"
                                  },
                                  "speed": {
                                    "type": "number"
                                  },
                                  "heading": {
                                    "type": "number"
                                  }
                                }
                              }
                            }
                          }
                        }
                      }
                    }
                  }
                },
                "responses": {
                  "200": {
                    "description": "Stored.",
                    "x-keeptrack-may-be-empty": true,
                    "content": {
                      "text/plain": {
                        "schema": {
                          "type": "string",
                          "maxLength": 0
                        }
                      }
                    }
                  },
                  "400": {
                    "description": "A parameter is wrong, or (a form, no credential) the device has no token\##
         (an empty body).",
                    "x-keeptrack-may-be-empty": true,
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Error"
                        }
                      }
                    }
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  },
                  "404": {
                    "description": "Traccar Client's JSON without a credential from a device without a token\##
         (an empty body).",
                    "x-keeptrack-may-be-empty": true
                  },
                  "413": {
                    "$ref": "#/components/responses/TooLarge"
                  }
                }
              },
              "head": {
                "tags": [
                  "live"
                ],
                "operationId": "headRoot",
                "summary": "The head of the map page (never stores).",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/owntracks": {
              "post": {
                "tags": [
                  "ingest"
                ],
                "operationId": "postOwnTracks",
                "summary": "OwnTracks' HTTP mode.",
                "description": "One OwnTracks message, stored as device `user/device` from `X-Limit-U`/`X-Li\##
        mit-D` (or\n`?u=`/`?d=`; `owntracks`/`phone` when absent). Messages without a position (`lwt`, `card\##
        `,\n...) store nothing. An encrypted payload (`{\"_type\":\"encrypted\",\"data\":...}`) is opened wi\##
        th\nthe device's secret and answered encrypted (docs/owntracks-encryption.md).\n",
                "parameters": [
                  {
                    "name": "X-Limit-U",
                    "in": "header",
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "X-Limit-D",
                    "in": "header",
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "u",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "d",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "requestBody": {
                  "content": {
                    "application/json": {
                      "schema": {
                        "type": "object",
                        "properties": {
                          "_type": {
                            "type": "string"
                          },
                          "lat": {
                            "type": "number"
                          },
                          "lon": {
                            "type": "number"
                          },
                          "tst": {
                            "type": "integer"
                          },
                          "data": {
                            "type": "string",
                            "description": "The ciphertext of `_type: encrypted`."
                          }
                        }
                      }
                    }
                  }
                },
                "responses": {
                  "200": {
                    "description": "Stored; `[]` (no friends' positions), encrypted when the request was.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "oneOf": [
                            {
                              "type": "array",
                              "maxItems": 0
                            },
                            {
                              "$ref": "#/components/schemas/OwnTracksEncrypted"
                            }
                          ]
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "description": "Another device's token, a Basic user that is not the device's, or an enc\##
        rypted payload that does not authenticate.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Error"
                        }
                      }
                    }
                  },
                  "413": {
                    "$ref": "#/components/responses/TooLarge"
                  },
                  "415": {
                    "description": "An encrypted payload from a device without a secret.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Error"
                        }
                      }
                    }
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/api/v1/overland/batches": {
              "post": {
                "tags": [
                  "ingest"
                ],
                "operationId": "postOverland",
                "summary": "Overland's batch (Dawarich's path).",
                "description": "`{\"locations\":[FEATURE,...]}`, GeoJSON Point features; each filed under it\##
        s `device_id`,\nelse the token's device, else `overland`. A batch sent again is stored once.\n",
                "requestBody": {
                  "required": true,
                  "content": {
                    "application/json": {
                      "schema": {
                        "type": "object",
                        "required": [
                          "locations"
                        ],
                        "properties": {
                          "locations": {
                            "type": "array",
                            "items": {
                              "type": "object",
                              "required": [
                                "geometry",
                                "properties"
                              ],
                              "properties": {
                                "type": {
                                  "const": "Feature"
                                },
                                "geometry": {
                                  "type": "object",
                                  "properties": {
                                    "type": {
                                      "const": "Point"
                                    },
                                    "coordinates": {
                                      "type": "array",
                                      "items": {
                                        "type": "number"
                                      },
                                      "minItems": 2
                                    }
                                  }
                                },
                                "properties": {
                                  "type": "object"
                                }
                              }
                            }
                          }
                        }
                      }
                    }
                  }
                },
                "responses": {
                  "200": {
                    "description": "Stored.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "result"
                          ],
                          "properties": {
                            "result": {
                              "const": "ok"
                            }
                          }
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  },
                  "413": {
                    "$ref": "#/components/responses/TooLarge"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/v1/devices": {
              "get": {
                "tags": [
                  "queries"
                ],
                "operationId": "getDevices",
                "summary": "The devices (a device token sees its own).",
                "responses": {
                  "200": {
                    "description": "Every device with stored points.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "devices"
                          ],
                          "properties": {
                            "devices": {
                              "type": "array",
                              "items": {
                                "$ref": "#/components/schemas/DeviceSummary"
                              }
                            }
                          }
                        }
                      }
                    }
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                }
              },
              "head": {
                "tags": [
                  "queries"
                ],
                "operationId": "headDevices",
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  },
                  "401": {
                    "$ref": "#/components/responses/UnauthorizedHead"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/v1/devices/latest": {
              "get": {
                "tags": [
                  "queries"
                ],
                "operationId": "getLatest",
                "summary": "Each device's latest position.",
                "responses": {
                  "200": {
                    "description": "The fleet's latest positions (a device token sees its own).",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "devices"
                          ],
                          "properties": {
                            "devices": {
                              "type": "array",
                              "items": {
                                "$ref": "#/components/schemas/LatestPosition"
                              }
                            }
                          }
                        }
                      }
                    }
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                }
              },
              "head": {
                "tags": [
                  "queries"
                ],
                "operationId": "headLatest",
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/v1/positions": {
              "get": {
                "tags": [
                  "queries"
                ],
                "operationId": "getPositions",
                "summary": "Positions in an area, by time, a page at a time.",
                "description": "One of `bbox=W,S,E,N` or `near=LAT,LON&radius=M`; `from`, `to`, `device` nar\##
        row. When more\nfollow, `next` holds the cursor and `Link: <...>; rel=\"next\"` the next page's URL.\##
        \n",
                "parameters": [
                  {
                    "name": "bbox",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "`W,S,E,N` in degrees."
                  },
                  {
                    "name": "near",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "`LAT,LON`, with `radius`."
                  },
                  {
                    "name": "radius",
                    "in": "query",
                    "schema": {
                      "type": "number",
                      "exclusiveMinimum": 0
                    },
                    "description": "Metres."
                  },
                  {
                    "$ref": "#/components/parameters/from"
                  },
                  {
                    "$ref": "#/components/parameters/to"
                  },
                  {
                    "name": "device",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "$ref": "#/components/parameters/limit"
                  },
                  {
                    "$ref": "#/components/parameters/cursor"
                  }
                ],
                "responses": {
                  "200": {
                    "description": "A page of positions.",
                    "headers": {
                      "Link": {
                        "$ref": "#/components/headers/Link"
                      }
                    },
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "positions"
                          ],
                          "properties": {
                            "positions": {
                              "type": "array",
                              "items": {
                                "$ref": "#/components/schemas/Position"
                              }
                            },
                            "next": {
                              "type": "string",
                              "description": "The next page's cursor."
                            }
                          }
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  }
                }
              },
              "head": {
                "tags": [
                  "queries"
                ],
                "operationId": "headPositions",
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequestHead"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/v1/devices/{id}/trail": {
              "parameters": [
                {
                  "$ref": "#/components/parameters/deviceId"
                }
              ],
              "get": {
                "tags": [
                  "queries"
                ],
                "operationId": "getTrail",
                "summary": "A device's trail, a page at a time.",
                "description": "By time. When more follow, a `Link: <...>; rel=\"next\"` header, and in JSON\##
         and GeoJSON a\n`next` member with the cursor. `invalid=true` includes records their sender marked i\##
        nvalid.\n",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/from"
                  },
                  {
                    "$ref": "#/components/parameters/to"
                  },
                  {
                    "name": "format",
                    "in": "query",
                    "schema": {
                      "type": "string",
                      "enum": [
                        "geojson",
                        "gpx",
                        "json"
                      ],
                      "default": "geojson"
                    }
                  },
                  {
                    "$ref": "#/components/parameters/limit"
                  },
                  {
                    "$ref": "#/components/parameters/cursor"
                  },
                  {
                    "name": "invalid",
                    "in": "query",
                    "schema": {
                      "type": "string",
                      "enum": [
                        "true",
                        "false"
                      ]
                    }
                  }
                ],
                "responses": {
                  "200": {
                    "description": "A page of the trail.",
                    "headers": {
                      "Link": {
                        "$ref": "#/components/headers/Link"
                      }
                    },
                    "content": {
                      "application/geo+json": {
                        "schema": {
                          "$ref": "#/components/schemas/TrailGeoJSON"
                        }
                      },
                      "application/gpx+xml": {
                        "schema": {
                          "type": "string"
                        }
                      },
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/TrailPage"
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  },
                  "404": {
                    "$ref": "#/components/responses/NotFound"
                  }
                }
              },
              "head": {
                "tags": [
                  "queries"
                ],
                "operationId": "headTrail",
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  },
                  "404": {
                    "$ref": "#/components/responses/NotFoundHead"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/v1/devices/{id}/stops": {
              "parameters": [
                {
                  "$ref": "#/components/parameters/deviceId"
                }
              ],
              "get": {
                "tags": [
                  "queries"
                ],
                "operationId": "getStops",
                "summary": "A device's stops over `from`-`to`, found in its stored points.",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/from"
                  },
                  {
                    "$ref": "#/components/parameters/to"
                  },
                  {
                    "name": "format",
                    "in": "query",
                    "schema": {
                      "type": "string",
                      "enum": [
                        "json"
                      ],
                      "default": "json"
                    }
                  }
                ],
                "responses": {
                  "200": {
                    "description": "The stops (docs/visits.md).",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Stops"
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  },
                  "404": {
                    "$ref": "#/components/responses/NotFound"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/v1/devices/{id}/trips": {
              "parameters": [
                {
                  "$ref": "#/components/parameters/deviceId"
                }
              ],
              "get": {
                "tags": [
                  "queries"
                ],
                "operationId": "getTrips",
                "summary": "The trips between a device's stops; `format=gpx` for their tracks.",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/from"
                  },
                  {
                    "$ref": "#/components/parameters/to"
                  },
                  {
                    "name": "format",
                    "in": "query",
                    "schema": {
                      "type": "string",
                      "enum": [
                        "json",
                        "gpx"
                      ],
                      "default": "json"
                    }
                  }
                ],
                "responses": {
                  "200": {
                    "description": "The trips.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Trips"
                        }
                      },
                      "application/gpx+xml": {
                        "schema": {
                          "type": "string"
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  },
                  "404": {
                    "$ref": "#/components/responses/NotFound"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/v1/stream": {
              "get": {
                "tags": [
                  "live"
                ],
                "operationId": "getStream",
                "summary": "The live stream, a WebSocket (docs/live.md).",
                "description": "Upgraded to a WebSocket (`Upgrade: websocket`): a `snapshot` message first, \##
        then a `record`\nmessage for each record stored after it, whatever route stored it. Credentials as t\##
        he rest\nof the API (`?token=` for browsers, which cannot set headers on a WebSocket); `?device=ID`\\##
        nnarrows. A refused stream is upgraded and closed at once with a code and a reason: 1008 (no\nor a w\##
        rong token, another device's id, a client whose queue overflows), 1013 (too many\nstreams).\n",
                "parameters": [
                  {
                    "name": "device",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Upgrade",
                    "in": "header",
                    "schema": {
                      "const": "websocket"
                    }
                  }
                ],
                "responses": {
                  "101": {
                    "description": "Switching to the WebSocket protocol; the messages are `x-keeptrack-webso\##
        cket`'s."
                  },
                  "426": {
                    "description": "Asked without `Upgrade: websocket`.",
                    "headers": {
                      "Upgrade": {
                        "schema": {
                          "const": "websocket"
                        }
                      }
                    },
                    "content": {
                      "text/plain": {
                        "schema": {
                          "type": "string"
                        }
                      }
                    }
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                },
                "x-keeptrack-websocket": {
                  "server-to-client": [
                    {
                      "$ref": "#/components/schemas/StreamSnapshot"
                    },
                    {
                      "$ref": "#/components/schemas/StreamRecord"
                    }
                  ],
                  "client-to-server": "nothing (pings are answered)."
                }
              },
              "head": {
                "tags": [
                  "live"
                ],
                "operationId": "headStream",
                "responses": {
                  "401": {
                    "$ref": "#/components/responses/UnauthorizedHead"
                  },
                  "426": {
                    "$ref": "#/components/responses/UpgradeRequiredHead"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/map": {
              "get": {
                "tags": [
                  "live"
                ],
                "operationId": "getMap",
                "summary": "The live map page (Leaflet), no data in it.",
                "description": "The page reads its token from `?token=` once; its data comes from the stream\##
         and the trail route.",
                "security": [],
                "responses": {
                  "200": {
                    "description": "The page.",
                    "content": {
                      "text/html": {
                        "schema": {
                          "type": "string"
                        }
                      }
                    }
                  }
                }
              },
              "head": {
                "tags": [
                  "live"
                ],
                "operationId": "headMap",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/map/app.js": {
              "get": {
                "tags": [
                  "live"
                ],
                "operationId": "getMapScript",
                "summary": "The map page's script.",
                "security": [],
                "responses": {
                  "200": {
                    "description": "JavaScript.",
                    "content": {
                      "text/javascript": {
                        "schema": {
                          "type": "string"
                        }
                      }
                    }
                  }
                }
              },
              "head": {
                "tags": [
                  "live"
                ],
                "operationId": "headMapScript",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/map/leaflet/{name}": {
              "parameters": [
                {
                  "$ref": "#/components/parameters/leafletName"
                }
              ],
              "get": {
                "tags": [
                  "live"
                ],
                "operationId": "getLeafletFile",
                "summary": "Leaflet's files, from Debian's libjs-leaflet (/usr/share/javascript/leaflet by d\##
        efault).",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/LeafletFile"
                  },
                  "404": {
                    "$ref": "#/components/responses/NotFound"
                  }
                }
              },
              "head": {
                "tags": [
                  "live"
                ],
                "operationId": "headLeafletFile",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  },
                  "404": {
                    "$ref": "#/components/responses/NotFoundHead"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/map/leaflet/images/{name}": {
              "parameters": [
                {
                  "$ref": "#/components/parameters/leafletName"
                }
              ],
              "get": {
                "tags": [
                  "live"
                ],
                "operationId": "getLeafletImage",
                "summary": "Leaflet's images.",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/LeafletFile"
                  },
                  "404": {
                    "$ref": "#/components/responses/NotFound"
                  }
                }
              },
              "head": {
                "tags": [
                  "live"
                ],
                "operationId": "headLeafletImage",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  },
                  "404": {
                    "$ref": "#/components/responses/NotFoundHead"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/map/svg": {
              "get": {
                "tags": [
                  "live"
                ],
                "operationId": "getMapSVG",
                "summary": "Trails as SVG in an HTML page, nothing fetched; `?device=ID` for one (a page at \##
        a time).",
                "parameters": [
                  {
                    "name": "device",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "$ref": "#/components/parameters/limit"
                  },
                  {
                    "$ref": "#/components/parameters/cursor"
                  }
                ],
                "responses": {
                  "200": {
                    "description": "The page.",
                    "content": {
                      "text/html": {
                        "schema": {
                          "type": "string"
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  }
                }
              },
              "head": {
                "tags": [
                  "live"
                ],
                "operationId": "headMapSVG",
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/api/0/version": {
              "get": {
                "tags": [
                  "recorder"
                ],
                "operationId": "getRecorderVersion",
                "summary": "keeptrack's version, as the Recorder gives its own.",
                "responses": {
                  "200": {
                    "description": "The version.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "version",
                            "git"
                          ],
                          "properties": {
                            "version": {
                              "type": "string"
                            },
                            "git": {
                              "type": "string"
                            }
                          }
                        }
                      }
                    }
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                }
              },
              "post": {
                "tags": [
                  "recorder"
                ],
                "summary": "keeptrack's version, as the Recorder gives its own.",
                "responses": {
                  "200": {
                    "description": "The version.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "version",
                            "git"
                          ],
                          "properties": {
                            "version": {
                              "type": "string"
                            },
                            "git": {
                              "type": "string"
                            }
                          }
                        }
                      }
                    }
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                },
                "operationId": "postRecorderVersion",
                "requestBody": {
                  "$ref": "#/components/requestBodies/RecorderForm"
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/api/0/list": {
              "get": {
                "tags": [
                  "recorder"
                ],
                "operationId": "getRecorderList",
                "summary": "The users, or with `user` that user's devices.",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/recorderUser"
                  },
                  {
                    "$ref": "#/components/parameters/recorderDevice"
                  }
                ],
                "responses": {
                  "200": {
                    "description": "Names.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "results"
                          ],
                          "properties": {
                            "results": {
                              "type": "array",
                              "items": {
                                "type": "string"
                              }
                            }
                          }
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                }
              },
              "post": {
                "tags": [
                  "recorder"
                ],
                "summary": "The users, or with `user` that user's devices.",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/recorderUser"
                  },
                  {
                    "$ref": "#/components/parameters/recorderDevice"
                  }
                ],
                "responses": {
                  "200": {
                    "description": "Names.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "results"
                          ],
                          "properties": {
                            "results": {
                              "type": "array",
                              "items": {
                                "type": "string"
                              }
                            }
                          }
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                },
                "operationId": "postRecorderList",
                "requestBody": {
                  "$ref": "#/components/requestBodies/RecorderForm"
                },
                "description": "The parameters as a form body (`curl -d user=...`), or in the query or `X-Li\##
        mit-*` headers."
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/api/0/last": {
              "get": {
                "tags": [
                  "recorder"
                ],
                "operationId": "getRecorderLast",
                "summary": "Each visible device's latest location; `user` (and `device`) narrow.",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/recorderUser"
                  },
                  {
                    "$ref": "#/components/parameters/recorderDevice"
                  },
                  {
                    "$ref": "#/components/parameters/recorderFields"
                  }
                ],
                "responses": {
                  "200": {
                    "description": "The Recorder's location objects.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "array",
                          "items": {
                            "$ref": "#/components/schemas/RecorderLocation"
                          }
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                }
              },
              "post": {
                "tags": [
                  "recorder"
                ],
                "summary": "Each visible device's latest location; `user` (and `device`) narrow.",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/recorderUser"
                  },
                  {
                    "$ref": "#/components/parameters/recorderDevice"
                  },
                  {
                    "$ref": "#/components/parameters/recorderFields"
                  }
                ],
                "responses": {
                  "200": {
                    "description": "The Recorder's location objects.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "array",
                          "items": {
                            "$ref": "#/components/schemas/RecorderLocation"
                          }
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  }
                },
                "operationId": "postRecorderLast",
                "requestBody": {
                  "$ref": "#/components/requestBodies/RecorderForm"
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/api/0/locations": {
              "get": {
                "tags": [
                  "recorder"
                ],
                "operationId": "getRecorderLocations",
                "summary": "A device's locations between `from` and `to` (the last 6 hours by default).",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/recorderUser"
                  },
                  {
                    "$ref": "#/components/parameters/recorderDevice"
                  },
                  {
                    "name": "from",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "UTC `YYYY-MM-DDTHH:MM:SS` (or shorter), or `X-Limit-From`."
                  },
                  {
                    "name": "to",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "UTC, or `X-Limit-To`."
                  },
                  {
                    "name": "limit",
                    "in": "query",
                    "schema": {
                      "type": "integer",
                      "minimum": 1
                    },
                    "description": "The last N, newest first."
                  },
                  {
                    "$ref": "#/components/parameters/recorderFields"
                  },
                  {
                    "name": "format",
                    "in": "query",
                    "schema": {
                      "type": "string",
                      "enum": [
                        "json"
                      ],
                      "default": "json"
                    }
                  }
                ],
                "responses": {
                  "200": {
                    "description": "The locations.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "data",
                            "count",
                            "status",
                            "version"
                          ],
                          "properties": {
                            "data": {
                              "type": "array",
                              "items": {
                                "$ref": "#/components/schemas/RecorderLocation"
                              }
                            },
                            "count": {
                              "type": "integer"
                            },
                            "status": {
                              "const": 200
                            },
                            "version": {
                              "type": "string"
                            }
                          }
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  },
                  "416": {
                    "description": "No `user` or `device`, or a time that is not one (the Recorder's status \##
        for both).",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Error"
                        }
                      }
                    }
                  }
                }
              },
              "post": {
                "tags": [
                  "recorder"
                ],
                "summary": "A device's locations between `from` and `to` (the last 6 hours by default).",
                "parameters": [
                  {
                    "$ref": "#/components/parameters/recorderUser"
                  },
                  {
                    "$ref": "#/components/parameters/recorderDevice"
                  },
                  {
                    "name": "from",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "UTC `YYYY-MM-DDTHH:MM:SS` (or shorter), or `X-Limit-From`."
                  },
                  {
                    "name": "to",
                    "in": "query",
                    "schema": {
                      "type": "string"
                    },
                    "description": "UTC, or `X-Limit-To`."
                  },
                  {
                    "name": "limit",
                    "in": "query",
                    "schema": {
                      "type": "integer",
                      "minimum": 1
                    },
                    "description": "The last N, newest first."
                  },
                  {
                    "$ref": "#/components/parameters/recorderFields"
                  },
                  {
                    "name": "format",
                    "in": "query",
                    "schema": {
                      "type": "string",
                      "enum": [
                        "json"
                      ],
                      "default": "json"
                    }
                  }
                ],
                "responses": {
                  "200": {
                    "description": "The locations.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "data",
                            "count",
                            "status",
                            "version"
                          ],
                          "properties": {
                            "data": {
                              "type": "array",
                              "items": {
                                "$ref": "#/components/schemas/RecorderLocation"
                              }
                            },
                            "count": {
                              "type": "integer"
                            },
                            "status": {
                              "const": 200
                            },
                            "version": {
                              "type": "string"
                            }
                          }
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  },
                  "416": {
                    "description": "No `user` or `device`, or a time that is not one (the Recorder's status \##
        for both).",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/Error"
                        }
                      }
                    }
                  }
                },
                "operationId": "postRecorderLocations",
                "requestBody": {
                  "$ref": "#/components/requestBodies/RecorderForm"
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/healthz": {
              "get": {
                "tags": [
                  "operations"
                ],
                "operationId": "getHealth",
                "summary": "Liveness.",
                "security": [],
                "responses": {
                  "200": {
                    "description": "Serving.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/StatusOK"
                        }
                      }
                    }
                  }
                }
              },
              "head": {
                "tags": [
                  "operations"
                ],
                "operationId": "headHealth",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/metrics": {
              "get": {
                "tags": [
                  "operations"
                ],
                "operationId": "getMetrics",
                "summary": "Prometheus text (docs/ARCHITECTURE.md, README \"Metrics\").",
                "security": [],
                "responses": {
                  "200": {
                    "description": "The metrics.",
                    "content": {
                      "text/plain": {
                        "schema": {
                          "type": "string"
                        }
                      }
                    }
                  }
                }
              },
              "head": {
                "tags": [
                  "operations"
                ],
                "operationId": "headMetrics",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/openapi.json": {
              "get": {
                "tags": [
                  "operations"
                ],
                "operationId": "getOpenAPI",
                "summary": "This document, as JSON.",
                "security": [],
                "responses": {
                  "200": {
                    "description": "The OpenAPI document.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "type": "object",
                          "required": [
                            "openapi",
                            "info",
                            "paths"
                          ],
                          "properties": {
                            "openapi": {
                              "type": "string"
                            },
                            "info": {
                              "type": "object"
                            },
                            "paths": {
                              "type": "object"
                            }
                          }
                        }
                      }
                    }
                  }
                }
              },
              "head": {
                "tags": [
                  "operations"
                ],
                "operationId": "headOpenAPI",
                "security": [],
                "responses": {
                  "200": {
                    "$ref": "#/components/responses/Head"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            },
            "/v1/faults": {
              "put": {
                "tags": [
                  "operations"
                ],
                "operationId": "putFaults",
                "summary": "Sets the injected faults (admin token only).",
                "description": "Missing keys keep their defaults (`{\"failRate\":0.3}` is enough).",
                "x-keeptrack-only-with": "faultInjection",
                "requestBody": {
                  "required": true,
                  "content": {
                    "application/json": {
                      "schema": {
                        "$ref": "#/components/schemas/Faults"
                      }
                    }
                  }
                },
                "responses": {
                  "200": {
                    "description": "Set.",
                    "content": {
                      "application/json": {
                        "schema": {
                          "$ref": "#/components/schemas/StatusOK"
                        }
                      }
                    }
                  },
                  "400": {
                    "$ref": "#/components/responses/BadRequest"
                  },
                  "401": {
                    "$ref": "#/components/responses/Unauthorized"
                  },
                  "403": {
                    "$ref": "#/components/responses/Forbidden"
                  }
                }
              },
              "options": {
                "summary": "CORS preflight (with allowed origins set), answered before authentication.",
                "x-keeptrack-only-with": "corsOrigins",
                "security": [],
                "parameters": [
                  {
                    "name": "Origin",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  },
                  {
                    "name": "Access-Control-Request-Method",
                    "in": "header",
                    "required": true,
                    "schema": {
                      "type": "string"
                    }
                  }
                ],
                "responses": {
                  "204": {
                    "description": "For a listed origin, `Access-Control-Allow-Origin`, `-Methods` (GET, HEA\##
        D, POST, PUT,\nOPTIONS), `-Headers` and `-Max-Age`; for another, no CORS header.\n"
                  }
                }
              }
            }
          },
          "components": {
            "securitySchemes": {
              "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "The admin token or a device's (`keeptrack serve devices add`)."
              },
              "basic": {
                "type": "http",
                "scheme": "basic",
                "description": "The token as the password (the OwnTracks apps); on `/owntracks` the user mus\##
        t be the device's user."
              },
              "tokenQuery": {
                "type": "apiKey",
                "in": "query",
                "name": "token",
                "description": "The token in the query (OsmAnd, browsers' WebSockets, the map page)."
              },
              "apiKeyQuery": {
                "type": "apiKey",
                "in": "query",
                "name": "api_key",
                "description": "The token as Dawarich's clients send it (Overland)."
              }
            },
            "parameters": {
              "deviceId": {
                "name": "id",
                "in": "path",
                "required": true,
                "description": "The device, percent-encoded (OwnTracks devices are `user%2Fdevice`).",
                "schema": {
                  "type": "string"
                }
              },
              "from": {
                "name": "from",
                "in": "query",
                "description": "The first time, ISO 8601 UTC or Unix seconds (included).",
                "schema": {
                  "type": "string"
                }
              },
              "to": {
                "name": "to",
                "in": "query",
                "description": "The last time, ISO 8601 UTC or Unix seconds (included).",
                "schema": {
                  "type": "string"
                }
              },
              "limit": {
                "name": "limit",
                "in": "query",
                "description": "The records in a page, from 1 to the server's largest page (100,000 by defau\##
        lt); its default page (10,000 by default) when absent.",
                "schema": {
                  "type": "integer",
                  "minimum": 1
                }
              },
              "cursor": {
                "name": "cursor",
                "in": "query",
                "description": "Where a page starts, from the previous page's `next` (opaque).",
                "schema": {
                  "type": "string"
                }
              },
              "leafletName": {
                "name": "name",
                "in": "path",
                "required": true,
                "description": "A file name (letters, digits, `-`, `.`, `_`; `.js`, `.css`, `.png` or `.svg`\##
        ).",
                "schema": {
                  "type": "string",
                  "pattern": "^[A-Za-z0-9_][A-Za-z0-9._-]*$"
                }
              },
              "recorderUser": {
                "name": "user",
                "in": "query",
                "description": "An OwnTracks user (or `X-Limit-User`).",
                "schema": {
                  "type": "string",
                  "maxLength": 4096
                }
              },
              "recorderDevice": {
                "name": "device",
                "in": "query",
                "description": "An OwnTracks device (or `X-Limit-Device`).",
                "schema": {
                  "type": "string",
                  "maxLength": 4096
                }
              },
              "recorderFields": {
                "name": "fields",
                "in": "query",
                "description": "The members to keep, comma-separated (or `X-Limit-Fields`).",
                "schema": {
                  "type": "string"
                }
              }
            },
            "requestBodies": {
              "RecorderForm": {
                "description": "The parameters as a form (`curl -d user=...`); the query's and `X-Limit-*` h\##
        eaders' as well.",
                "content": {
                  "application/x-www-form-urlencoded": {
                    "schema": {
                      "type": "object",
                      "properties": {
                        "user": {
                          "type": "string"
                        },
                        "device": {
                          "type": "string"
                        },
                        "from": {
                          "type": "string"
                        },
                        "to": {
                          "type": "string"
                        },
                        "limit": {
                          "type": "string"
                        },
                        "fields": {
                          "type": "string"
                        },
                        "format": {
                          "type": "string"
                        }
                      }
                    }
                  }
                }
              }
            },
            "headers": {
              "Link": {
                "description": "`<URL>; rel=\"next\"` when more follow.",
                "schema": {
                  "type": "string"
                }
              }
            },
            "responses": {
              "BadRequest": {
                "description": "The request is wrong; the message names the parameter or field.",
                "content": {
                  "application/json": {
                    "schema": {
                      "$ref": "#/components/schemas/Error"
                    }
                  }
                }
              },
              "BadRequestHead": {
                "description": "The request is wrong (no body)."
              },
              "Unauthorized": {
                "description": "No credential, or not a known one.",
                "headers": {
                  "WWW-Authenticate": {
                    "schema": {
                      "const": "Basic realm=\"keeptrack\""
                    }
                  }
                },
                "content": {
                  "application/json": {
                    "schema": {
                      "$ref": "#/components/schemas/Error"
                    }
                  }
                }
              },
              "UnauthorizedHead": {
                "description": "No credential, or not a known one (no body)."
              },
              "Forbidden": {
                "description": "A device token asking for another device.",
                "content": {
                  "application/json": {
                    "schema": {
                      "$ref": "#/components/schemas/Error"
                    }
                  }
                }
              },
              "NotFound": {
                "description": "No such device (or file).",
                "content": {
                  "application/json": {
                    "schema": {
                      "$ref": "#/components/schemas/Error"
                    }
                  }
                }
              },
              "NotFoundHead": {
                "description": "No such device or file (no body)."
              },
              "BodyTimeout": {
                "description": "The body did not arrive within the server's body timeout (60 s by default)."\##
        ,
                "x-keeptrack-not-exercised": "needs a body that stops arriving (HostileRequestTests).",
                "content": {
                  "application/json": {
                    "schema": {
                      "$ref": "#/components/schemas/Error"
                    }
                  }
                }
              },
              "TooLarge": {
                "description": "The body, inflated, is over the server's body limit (8 MiB by default); the \##
        connection is closed.",
                "content": {
                  "application/json": {
                    "schema": {
                      "$ref": "#/components/schemas/Error"
                    }
                  }
                }
              },
              "Busy": {
                "description": "Too many large bodies in memory at once (`Retry-After`), or every connection\##
         busy.",
                "x-keeptrack-not-exercised": "needs bodies in flight over the budget (EndpointLimitsTests)."\##
        ,
                "headers": {
                  "Retry-After": {
                    "schema": {
                      "type": "integer"
                    }
                  }
                },
                "content": {
                  "application/json": {
                    "schema": {
                      "$ref": "#/components/schemas/Error"
                    }
                  }
                }
              },
              "Head": {
                "description": "The head GET answers, without the body.",
                "headers": {
                  "Content-Length": {
                    "schema": {
                      "type": "integer"
                    }
                  }
                }
              },
              "UpgradeRequiredHead": {
                "description": "The head of the answer to a GET without `Upgrade: websocket`."
              },
              "LeafletFile": {
                "description": "The file.",
                "content": {
                  "text/javascript": {
                    "schema": {
                      "type": "string"
                    }
                  },
                  "text/css": {
                    "schema": {
                      "type": "string"
                    }
                  },
                  "image/png": {
                    "schema": {
                      "type": "string",
                      "contentMediaType": "image/png"
                    }
                  },
                  "image/svg+xml": {
                    "schema": {
                      "type": "string"
                    }
                  }
                }
              }
            },
            "schemas": {
              "Error": {
                "type": "object",
                "required": [
                  "error"
                ],
                "properties": {
                  "error": {
                    "type": "object",
                    "required": [
                      "message"
                    ],
                    "properties": {
                      "message": {
                        "type": "string"
                      }
                    }
                  }
                }
              },
              "StatusOK": {
                "type": "object",
                "required": [
                  "status"
                ],
                "properties": {
                  "status": {
                    "const": "ok"
                  }
                }
              },
              "Time": {
                "type": "string",
                "format": "date-time",
                "description": "ISO 8601 UTC with milliseconds (`2024-05-14T09:30:00.000Z`)."
              },
              "Number": {
                "type": [
                  "number",
                  "null"
                ]
              },
              "Batch": {
                "type": "object",
                "required": [
                  "device",
                  "records"
                ],
                "properties": {
                  "device": {
                    "type": "string"
                  },
                  "records": {
                    "type": "array",
                    "items": {
                      "$ref": "#/components/schemas/BatchRecord"
                    }
                  }
                }
              },
              "BatchRecord": {
                "type": "object",
                "required": [
                  "seq",
                  "kind",
                  "time",
                  "lat",
                  "lon"
                ],
                "description": "Unknown members are ignored.",
                "properties": {
                  "id": {
                    "type": "string",
                    "description": "`device:seq`."
                  },
                  "seq": {
                    "type": "integer"
                  },
                  "kind": {
                    "$ref": "#/components/schemas/Kind"
                  },
                  "region": {
                    "type": "string",
                    "description": "The region of `enter`, `exit` and `dwell`."
                  },
                  "time": {
                    "type": "string",
                    "description": "ISO 8601."
                  },
                  "lat": {
                    "type": "number",
                    "minimum": -90,
                    "maximum": 90
                  },
                  "lon": {
                    "type": "number",
                    "minimum": -180,
                    "maximum": 180
                  },
                  "alt": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "hAcc": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "vAcc": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "speed": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "course": {
                    "$ref": "#/components/schemas/Number"
                  }
                }
              },
              "Kind": {
                "type": "string",
                "enum": [
                  "location",
                  "enter",
                  "exit",
                  "dwell",
                  "visit",
                  "trip",
                  "heartbeat"
                ]
              },
              "Acceptance": {
                "type": "object",
                "required": [
                  "accepted",
                  "duplicates"
                ],
                "properties": {
                  "accepted": {
                    "type": "integer",
                    "minimum": 0
                  },
                  "duplicates": {
                    "type": "integer",
                    "minimum": 0
                  }
                }
              },
              "TrailRecord": {
                "type": "object",
                "required": [
                  "id",
                  "seq",
                  "kind",
                  "time",
                  "lat",
                  "lon"
                ],
                "properties": {
                  "id": {
                    "type": "string"
                  },
                  "seq": {
                    "type": "integer"
                  },
                  "kind": {
                    "$ref": "#/components/schemas/Kind"
                  },
                  "region": {
                    "type": "string"
                  },
                  "time": {
                    "$ref": "#/components/schemas/Time"
                  },
                  "lat": {
                    "type": "number"
                  },
                  "lon": {
                    "type": "number"
                  },
                  "alt": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "hAcc": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "vAcc": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "speed": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "course": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "departure": {
                    "type": [
                      "string",
                      "null"
                    ],
                    "description": "A visit's end (null while there)."
                  },
                  "end": {
                    "type": "string",
                    "description": "A trip's end."
                  },
                  "endLat": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "endLon": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "distance": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "duration": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "avgSpeed": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "maxSpeed": {
                    "$ref": "#/components/schemas/Number"
                  },
                  "valid": {
                    "type": "boolean",
                    "description": "Present (false) on records marked invalid, with `invalid=true`."
                  },
                  "attributes": {
                    "type": "object",
                    "additionalProperties": {
                      "type": "string"
                    }
                  }
                }
              },
              "TrailPage": {
                "type": "object",
                "required": [
                  "device",
                  "records"
                ],
                "properties": {
                  "device": {
                    "type": "string"
                  },
                  "records": {
                    "type": "array",
                    "items": {
                      "$ref": "#/components/schemas/TrailRecord"
                    }
                  },
                  "next": {
                    "type": "string"
                  }
                }
              },
              "TrailGeoJSON": {
                "type": "object",
                "required": [
                  "type",
                  "features"
                ],
                "description": "The locations as one LineString feature (a Point for one, no geometry for no\##
        ne) with their\ntimes; each region event as a Point feature.\n",
                "properties": {
                  "type": {
                    "const": "FeatureCollection"
                  },
                  "features": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "required": [
                        "type",
                        "properties",
                        "geometry"
                      ],
                      "properties": {
                        "type": {
                          "const": "Feature"
                        },
                        "properties": {
                          "type": "object",
                          "properties": {
                            "device": {
                              "type": "string"
                            },
                            "points": {
                              "type": "integer"
                            },
                            "from": {
                              "$ref": "#/components/schemas/Time"
                            },
                            "to": {
                              "$ref": "#/components/schemas/Time"
                            },
                            "times": {
                              "type": "array",
                              "items": {
                                "$ref": "#/components/schemas/Time"
                              }
                            },
                            "event": {
                              "type": "string"
                            },
                            "region": {
                              "type": "string"
                            },
                            "time": {
                              "$ref": "#/components/schemas/Time"
                            }
                          }
                        },
                        "geometry": {
                          "type": [
                            "object",
                            "null"
                          ],
                          "required": [
                            "type",
                            "coordinates"
                          ],
                          "properties": {
                            "type": {
                              "type": "string",
                              "enum": [
                                "Point",
                                "LineString"
                              ]
                            },
                            "coordinates": {
                              "type": "array"
                            }
                          }
                        }
                      }
                    }
                  },
                  "next": {
                    "type": "string"
                  }
                }
              },
              "DeviceSummary": {
                "type": "object",
                "required": [
                  "id",
                  "points",
                  "first",
                  "last",
                  "lastReceived"
                ],
                "properties": {
                  "id": {
                    "type": "string"
                  },
                  "points": {
                    "type": "integer"
                  },
                  "first": {
                    "$ref": "#/components/schemas/Time"
                  },
                  "last": {
                    "$ref": "#/components/schemas/Time"
                  },
                  "lastReceived": {
                    "$ref": "#/components/schemas/Time"
                  }
                }
              },
              "Position": {
                "type": "object",
                "required": [
                  "device",
                  "time",
                  "lat",
                  "lon"
                ],
                "properties": {
                  "device": {
                    "type": "string"
                  },
                  "time": {
                    "$ref": "#/components/schemas/Time"
                  },
                  "lat": {
                    "type": "number"
                  },
                  "lon": {
                    "type": "number"
                  },
                  "alt": {
                    "type": "number"
                  },
                  "accuracy": {
                    "type": "number"
                  },
                  "speed": {
                    "type": "number"
                  },
                  "course": {
                    "type": "number"
                  }
                }
              },
              "LatestPosition": {
                "type": "object",
                "required": [
                  "id",
                  "time",
                  "lat",
                  "lon",
                  "points",
                  "lastReceived"
                ],
                "properties": {
                  "id": {
                    "type": "string"
                  },
                  "time": {
                    "$ref": "#/components/schemas/Time"
                  },
                  "lat": {
                    "type": "number"
                  },
                  "lon": {
                    "type": "number"
                  },
                  "alt": {
                    "type": "number"
                  },
                  "accuracy": {
                    "type": "number"
                  },
                  "speed": {
                    "type": "number"
                  },
                  "course": {
                    "type": "number"
                  },
                  "points": {
                    "type": "integer"
                  },
                  "lastReceived": {
                    "$ref": "#/components/schemas/Time"
                  }
                }
              },
              "Stops": {
                "type": "object",
                "required": [
                  "device",
                  "stops"
                ],
                "properties": {
                  "device": {
                    "type": "string"
                  },
                  "stops": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "required": [
                        "start",
                        "end",
                        "duration",
                        "lat",
                        "lon",
                        "radius",
                        "fixes"
                      ],
                      "properties": {
                        "start": {
                          "$ref": "#/components/schemas/Time"
                        },
                        "end": {
                          "type": [
                            "string",
                            "null"
                          ],
                          "description": "Null while still there at the last point."
                        },
                        "duration": {
                          "$ref": "#/components/schemas/Number"
                        },
                        "lat": {
                          "type": "number"
                        },
                        "lon": {
                          "type": "number"
                        },
                        "radius": {
                          "type": "number",
                          "description": "Metres."
                        },
                        "fixes": {
                          "type": "integer"
                        }
                      }
                    }
                  }
                }
              },
              "Trips": {
                "type": "object",
                "required": [
                  "device",
                  "trips"
                ],
                "properties": {
                  "device": {
                    "type": "string"
                  },
                  "trips": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "required": [
                        "start",
                        "end",
                        "duration",
                        "distance",
                        "avgSpeed",
                        "maxSpeed",
                        "startLat",
                        "startLon",
                        "endLat",
                        "endLon"
                      ],
                      "properties": {
                        "start": {
                          "$ref": "#/components/schemas/Time"
                        },
                        "end": {
                          "$ref": "#/components/schemas/Time"
                        },
                        "duration": {
                          "$ref": "#/components/schemas/Number"
                        },
                        "distance": {
                          "$ref": "#/components/schemas/Number"
                        },
                        "avgSpeed": {
                          "$ref": "#/components/schemas/Number"
                        },
                        "maxSpeed": {
                          "$ref": "#/components/schemas/Number"
                        },
                        "startLat": {
                          "type": "number"
                        },
                        "startLon": {
                          "type": "number"
                        },
                        "endLat": {
                          "type": "number"
                        },
                        "endLon": {
                          "type": "number"
                        }
                      }
                    }
                  }
                }
              },
              "OwnTracksEncrypted": {
                "type": "object",
                "required": [
                  "_type",
                  "data"
                ],
                "properties": {
                  "_type": {
                    "const": "encrypted"
                  },
                  "data": {
                    "type": "string"
                  }
                }
              },
              "RecorderLocation": {
                "type": "object",
                "description": "The Recorder's location object; with `fields`, only the members named.",
                "properties": {
                  "_type": {
                    "const": "location"
                  },
                  "tst": {
                    "type": "integer"
                  },
                  "lat": {
                    "type": "number"
                  },
                  "lon": {
                    "type": "number"
                  },
                  "acc": {
                    "type": "integer"
                  },
                  "alt": {
                    "type": "integer"
                  },
                  "vac": {
                    "type": "integer"
                  },
                  "vel": {
                    "type": "integer",
                    "description": "km/h."
                  },
                  "cog": {
                    "type": "integer"
                  },
                  "tid": {
                    "type": "string"
                  },
                  "topic": {
                    "type": "string"
                  },
                  "username": {
                    "type": "string"
                  },
                  "device": {
                    "type": "string"
                  },
                  "ghash": {
                    "type": "string"
                  },
                  "isotst": {
                    "type": "string"
                  },
                  "disptst": {
                    "type": "string"
                  },
                  "isorcv": {
                    "type": "string"
                  }
                }
              },
              "StreamSnapshot": {
                "type": "object",
                "description": "The stream's first message; each visible device's latest position.",
                "required": [
                  "type",
                  "devices"
                ],
                "properties": {
                  "type": {
                    "const": "snapshot"
                  },
                  "devices": {
                    "type": "array",
                    "items": {
                      "$ref": "#/components/schemas/LatestPosition"
                    }
                  }
                }
              },
              "StreamRecord": {
                "type": "object",
                "description": "A record stored after the snapshot, in storage order.",
                "required": [
                  "type",
                  "device",
                  "record"
                ],
                "properties": {
                  "type": {
                    "const": "record"
                  },
                  "device": {
                    "type": "string"
                  },
                  "record": {
                    "$ref": "#/components/schemas/TrailRecord"
                  }
                }
              },
              "Faults": {
                "type": "object",
                "properties": {
                  "refuse": {
                    "type": "boolean"
                  },
                  "failRate": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1
                  },
                  "failNext": {
                    "type": "integer",
                    "minimum": 0
                  },
                  "failStatus": {
                    "type": "integer",
                    "minimum": 400,
                    "maximum": 599
                  },
                  "retryAfter": {
                    "type": [
                      "integer",
                      "null"
                    ]
                  },
                  "delay": {
                    "type": "number",
                    "minimum": 0
                  },
                  "dropRate": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1
                  },
                  "dropNext": {
                    "type": "integer",
                    "minimum": 0
                  },
                  "garbageNext": {
                    "type": "integer",
                    "minimum": 0
                  }
                }
              }
            }
          }
        }
        """##
}
