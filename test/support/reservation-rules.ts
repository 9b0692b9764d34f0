/**
 * The rules the reserve-through-rules tests run on (test/rules/reservations.test.ts, the service's
 * test/service/http/rules-reservations.test.ts): an org budget over a user budget (all or nothing),
 * a rule counting 2 units a call (`cost: 2`), a shared capacity (`share`, which takes no
 * reservations) and an unlimited descriptor.
 */
export const RESERVATION_RULES = `domain: tokens
descriptors:
  - key: org
    rate_limit: { name: org_tokens, unit: hour, requests_per_unit: 100 }
    descriptors:
      - key: user
        rate_limit: { name: user_tokens, unit: hour, requests_per_unit: 30, algorithm: token-bucket }
  - key: double
    rate_limit: { unit: hour, requests_per_unit: 50, cost: 2 }
  - key: shared
    rate_limit: { unit: hour, requests_per_unit: 10, share: { group: tokens, weight: 1 } }
  - key: free
    rate_limit: { unlimited: true }
`;

/** The descriptors of one request of `user` in `org`: the org's budget and the user's. */
export function orgAndUser(org: string, user: string): { entries: { key: string; value: string }[] }[] {
  return [{ entries: [{ key: 'org', value: org }] }, { entries: [{ key: 'org', value: org }, { key: 'user', value: user }] }];
}
