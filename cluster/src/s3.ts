/**
 * A real S3-compatible object store — SeaweedFS (github.com/seaweedfs/seaweedfs, built from Go
 * modules by `engines/build.sh seaweedfs`) — in a pod on the local cluster's real node, for
 * end-to-end tests of what operators keep in S3 (backups).
 *
 * Guarantees:
 * - `s3Image(env)` is an image of the built binary alone (`/bin/weed`, uid 65534), loaded into the
 *   real node's containerd once; its tag names the build.
 * - `deployS3Server(env, namespace, bucket)` runs `weed server -s3` (master, volume server, filer
 *   and S3 gateway in one process, data on an emptyDir) in the caller's namespace behind Service
 *   `s3`: S3 over HTTPS alone on S3_PORT (the Service's port and the pod's), its certificate
 *   issued for `s3.<namespace>.svc` by a CA made here, one identity with credentials generated
 *   here and every permission. It returns once the pod is Ready and `bucket` exists (made through
 *   the S3 API itself, signed with those credentials and checked against that CA), with the
 *   endpoint (`s3.<namespace>.svc:<port>`), the credentials and the CA's PEM. The namespace is the
 *   caller's to delete.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { request } from 'node:https';
import { issueCertificate, Kinds, makeCertificateAuthority } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { engineImage, onRealNode, readyPodIP } from './real-node.ts';

export const S3_PORT = 8333;
const CONFIG_DIR = '/etc/s3';
/** SeaweedFS's default region, which it signs and checks requests with. */
export const S3_REGION = 'us-east-1';

/** The SeaweedFS image (the binary built by engines/build.sh), loaded into the real node's containerd; its reference. */
export function s3Image(env: TestEnv): Promise<string> {
  return engineImage(env, 'seaweedfs', 'weed');
}

export interface S3Server {
  /** host:port as an in-cluster client names it: `s3.<namespace>.svc:<port>`. */
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The PEM of the CA that issued the server's certificate. */
  caPem: string;
}

/** Runs SeaweedFS's S3 gateway on the real node in `namespace`; returns once it is ready and `bucket` exists. */
export async function deployS3Server(env: TestEnv, namespace: string, bucket: string): Promise<S3Server> {
  const name = 's3';
  const host = `${name}.${namespace}.svc`;
  const ca = makeCertificateAuthority('S3 test CA', 1);
  const server = issueCertificate(ca, [`DNS:${host}`], 1, host);
  const accessKeyId = `AK${randomBytes(8).toString('hex').toUpperCase()}`;
  const secretAccessKey = randomBytes(24).toString('base64url');
  const identities = { identities: [{ name: 'test', credentials: [{ accessKey: accessKeyId, secretKey: secretAccessKey }], actions: ['Admin', 'Read', 'List', 'Tagging', 'Write'] }] };
  const labels = { 'app.kubernetes.io/name': name };
  await env.client.create(Kinds.Secret, {
    metadata: { name, namespace },
    stringData: { 'tls.crt': server.cert, 'tls.key': server.key, 's3.json': JSON.stringify(identities) },
  });
  await env.client.create(Kinds.Service, {
    metadata: { name, namespace },
    spec: { selector: labels, ports: [{ name: 'https', port: S3_PORT, targetPort: S3_PORT, protocol: 'TCP' }] },
  });
  await env.client.create(Kinds.Pod, {
    metadata: { name, namespace, labels },
    spec: {
      ...onRealNode,
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534, fsGroup: 65534, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name,
          image: await s3Image(env),
          imagePullPolicy: 'Never',
          args: [
            'server',
            '-dir=/data',
            '-master.volumeSizeLimitMB=64',
            '-s3',
            `-s3.port=${S3_PORT}`,
            `-s3.config=${CONFIG_DIR}/s3.json`,
            `-s3.cert.file=${CONFIG_DIR}/tls.crt`,
            `-s3.key.file=${CONFIG_DIR}/tls.key`,
          ],
          ports: [{ name: 'https', containerPort: S3_PORT }],
          readinessProbe: { tcpSocket: { port: S3_PORT }, periodSeconds: 1 },
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '1Gi' } },
          volumeMounts: [
            { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
            { name: 'data', mountPath: '/data' },
            { name: 'tmp', mountPath: '/tmp' },
          ],
        },
      ],
      volumes: [
        { name: 'config', secret: { secretName: name } },
        { name: 'data', emptyDir: {} },
        { name: 'tmp', emptyDir: {} },
      ],
    },
  });
  const ip = await readyPodIP(env, namespace, name, 'the S3 server', 180_000);
  const s3: S3Server = { endpoint: `${host}:${S3_PORT}`, bucket, region: S3_REGION, accessKeyId, secretAccessKey, caPem: ca.cert };
  // The gateway listens before the filer behind it serves: a bucket made too early is refused with a 5xx.
  await waitFor(`bucket ${bucket} made`, async () => {
    const status = await signedRequest(s3, ip, 'PUT', `/${bucket}`).catch((e: unknown) => String(e));
    // 409: made by an earlier attempt whose answer was lost.
    return { done: status === 200 || status === 409, value: undefined, seen: status };
  }, { timeoutMs: 60_000, intervalMs: 1000 });
  return s3;
}

const sha256 = (data: string) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** A request without a body to the S3 API at `ip`, named by the endpoint's host (its certificate's), signed with AWS Signature Version 4; its status. */
function signedRequest(s3: S3Server, ip: string, method: string, pathname: string): Promise<number> {
  const [host, port] = s3.endpoint.split(':') as [string, string];
  const time = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  const day = time.slice(0, 8);
  const payload = sha256('');
  const headers: Record<string, string> = { host: s3.endpoint, 'x-amz-content-sha256': payload, 'x-amz-date': time };
  const signed = Object.keys(headers).sort();
  const canonical = [method, pathname, '', ...signed.map((h) => `${h}:${headers[h]}`), '', signed.join(';'), payload].join('\n');
  const scope = `${day}/${s3.region}/s3/aws4_request`;
  const key = ['s3', 'aws4_request'].reduce((k, part) => hmac(k, part), hmac(hmac(`AWS4${s3.secretAccessKey}`, day), s3.region));
  const signature = createHmac('sha256', key).update(['AWS4-HMAC-SHA256', time, scope, sha256(canonical)].join('\n')).digest('hex');
  const authorization = `AWS4-HMAC-SHA256 Credential=${s3.accessKeyId}/${scope}, SignedHeaders=${signed.join(';')}, Signature=${signature}`;
  return new Promise((resolve, reject) => {
    const req = request({ host: ip, port: Number(port), servername: host, ca: s3.caPem, method, path: pathname, headers: { ...headers, authorization }, timeout: 10_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${pathname}: no answer within 10 s`)));
    req.on('error', reject);
    req.end();
  });
}
