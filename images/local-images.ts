/**
 * The names under which this machine's builds keep the reference IoT service's images
 * (scripts/iot-service-images.ts builds and tags them; tests and benchmarks that need an image
 * as built take it from there).
 *
 * Guarantees: `localImage` is the only spelling of that name: `localhost/iot/iot-<component>:<version>`.
 */
export const localImage = (component: string, version: string): string => `localhost/iot/iot-${component}:${version}`;
