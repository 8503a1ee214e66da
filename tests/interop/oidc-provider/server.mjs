// The certified node oidc-provider (https://github.com/panva/node-oidc-provider) as the issuer of
// DPoP-bound access tokens (RFC 9449) for tests/integration/auth/test_oidc_provider_dpop.py.
//
//   node server.mjs <port> <resource> <jwt|opaque> <gateway client secret> <caller secret>
//
// Clients: "dpop-caller" (client_credentials, client_secret_basic) asks for tokens with a DPoP
// proof; "mcp-gateway" introspects (RFC 7662). Access tokens for <resource> are JWTs signed
// ES256 (RFC 9068) or opaque, with cnf.jkt when the token request carried a proof (the DPoP
// feature is on by default in oidc-provider 9). Prints one JSON line once it listens.
import Provider from 'oidc-provider';
import { generateKeyPairSync } from 'node:crypto';

const [port, resource, format, gatewaySecret, callerSecret] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const scope = 'mcp:access tools:echo';
const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signing = { ...privateKey.export({ format: 'jwk' }), alg: 'ES256', use: 'sig', kid: 'es256' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'dpop-caller',
      client_secret: callerSecret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      id_token_signed_response_alg: 'ES256',
      scope,
    },
    {
      client_id: 'mcp-gateway',
      client_secret: gatewaySecret,
      grant_types: [],
      redirect_uris: [],
      response_types: [],
      id_token_signed_response_alg: 'ES256',
    },
  ],
  jwks: { keys: [signing] },
  scopes: scope.split(' '),
  features: {
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: async () => true },
    dPoP: { enabled: true },
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => resource,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator) => {
        if (indicator !== resource) throw new Error('unknown resource');
        return {
          scope,
          audience: resource,
          accessTokenFormat: format,
          accessTokenTTL: 600,
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
});
provider.proxy = false;

const server = provider.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
